"""``dsh-scripted-model-server --script FILE | --library DIR [--port 0]``: the server as a
process."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from dsh_llm_deepseek.testing._library import ScriptLibrary
from dsh_llm_deepseek.testing._script import ScriptError
from dsh_llm_deepseek.testing._server import ScriptedModelServer

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script file until SIGTERM or end of stdin; print ``BASE_URL=…`` first.

    Returns:
        0 after a clean stop, 2 when the script file is invalid or unreadable.
    """
    parser = argparse.ArgumentParser(
        prog="dsh-scripted-model-server",
        description="Serve scripted OpenAI-compatible streaming responses on 127.0.0.1.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--script", help="JSON script file")
    source.add_argument(
        "--library",
        metavar="DIR",
        help="serve every scenario folder under DIR (input.json + model.script.json), "
        "routing each request by its content",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument(
        "--ignore-stdin",
        action="store_true",
        help="do not stop at end of stdin (stop on SIGTERM only)",
    )
    args = parser.parse_args(argv)
    try:
        if args.library is not None:
            library = ScriptLibrary.from_folder(args.library)
            server = ScriptedModelServer(port=args.port, router=library.route)
        else:
            server = ScriptedModelServer.from_file(args.script, port=args.port)
    except ScriptError as exc:
        print(f"dsh-scripted-model-server: invalid script: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"dsh-scripted-model-server: cannot read script: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def watch_stdin() -> None:
        while sys.stdin.buffer.read(65536):
            pass
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with server:
            print(f"BASE_URL={server.base_url}", flush=True)
            if not args.ignore_stdin:
                threading.Thread(target=watch_stdin, name="stdin-eof", daemon=True).start()
            while not stop.wait(0.5):
                pass
            for problem in server.unconsumed():
                print(f"dsh-scripted-model-server: {problem}", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
