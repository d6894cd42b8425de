"""``dsh-scripted-model-server --script FILE | --library DIR [--port 0] [--strict] …``: the
server as a process."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from types import FrameType
from typing import Any

from dsh_core.plugins import PluginError
from dsh_scripted_server._faults import Fault
from dsh_scripted_server._library import ScriptLibrary
from dsh_scripted_server._script import ScriptError
from dsh_scripted_server._server import ScriptedModelServer

__all__ = ["main"]


def _version() -> str:
    try:
        return version("dsh-scripted-server")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script file until SIGTERM or end of stdin; print ``BASE_URL=…`` first.

    Returns:
        0 after a clean stop, 2 when the script file is invalid or unreadable, or an option is.
    """
    parser = argparse.ArgumentParser(
        prog="dsh-scripted-model-server",
        description="Serve scripted OpenAI-compatible streaming responses on 127.0.0.1.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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
        "--strict",
        action="store_true",
        help="behave as the live API does today: bearer key required, real 400s for unknown "
        "models and missing reasoning_content on tool-call turns",
    )
    parser.add_argument(
        "--profile",
        default="openai",
        metavar="NAME",
        help="the API to play: an installed dsh.models provider on the chat-completions wire "
        "(default: openai, the generic API; deepseek…)",
    )
    parser.add_argument(
        "--models",
        help="comma-separated ids GET /models serves (default: the profile's served models)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="require the key held by this environment variable (never on the command line)",
    )
    parser.add_argument(
        "--models-status", type=int, metavar="N", help="answer every GET /models with HTTP N"
    )
    parser.add_argument(
        "--chat-status", type=int, metavar="N", help="answer every chat request with HTTP N"
    )
    parser.add_argument(
        "--retry-after", type=float, metavar="S", help="Retry-After of those two answers"
    )
    parser.add_argument(
        "--ignore-stdin",
        action="store_true",
        help="do not stop at end of stdin (stop on SIGTERM only)",
    )
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(f"dsh-scripted-model-server: ${args.api_key_env} is empty", file=sys.stderr)
            return 2
    try:
        faults = [
            None if n is None else Fault.status(n, retry_after=args.retry_after)
            for n in (args.models_status, args.chat_status)
        ]
    except ValueError as exc:
        print(f"dsh-scripted-model-server: {exc}", file=sys.stderr)
        return 2
    options: dict[str, Any] = {
        "port": args.port,
        "api_key": api_key,
        "strict": args.strict,
        "models": None
        if args.models is None
        else [m.strip() for m in args.models.split(",") if m.strip()],
        "profile": args.profile,
        "models_fault": faults[0],
        "chat_fault": faults[1],
    }
    try:
        if args.library is not None:
            library = ScriptLibrary.from_folder(args.library)
            server = ScriptedModelServer(router=library.route, **options)
        else:
            server = ScriptedModelServer.from_file(args.script, **options)
    except ScriptError as exc:
        print(f"dsh-scripted-model-server: invalid script: {exc}", file=sys.stderr)
        return 2
    except (PluginError, ValueError) as exc:
        print(f"dsh-scripted-model-server: --profile: {exc}", file=sys.stderr)
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
