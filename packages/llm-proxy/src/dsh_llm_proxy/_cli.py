"""``dsh-llm-proxy record|replay``: the proxy as a process."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from dsh_core import DshError
from dsh_core.plugins import DEFAULT_STORE_BACKEND, store_backend_names
from dsh_llm_proxy._policy import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_TOKENS,
    RecordPolicy,
)
from dsh_llm_proxy._scrub import Scrub, parse_assignment
from dsh_llm_proxy._server import ProxyServer

__all__ = ["main"]


def _version() -> str:
    try:
        return version("dsh-llm-proxy")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-llm-proxy",
        description="Record and replay any OpenAI-compatible agent's model calls as DSH sessions.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    modes = parser.add_subparsers(dest="mode", required=True)
    record = modes.add_parser("record", help="forward to the upstream and write session logs")
    record.add_argument("--root", required=True, help="folder the session logs go to")
    record.add_argument(
        "--store",
        default=DEFAULT_STORE_BACKEND,
        metavar="NAME",
        help="the store backend the sessions go to: any installed dsh.stores plugin "
        f"({', '.join(store_backend_names())}; default: {DEFAULT_STORE_BACKEND})",
    )
    record.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    record.add_argument(
        "--upstream",
        help="upstream API root (default: the default model provider's, see upstream_defaults)",
    )
    record.add_argument(
        "--api-key-env",
        help="environment variable holding the upstream key (default: the default model "
        "provider's key variable)",
    )
    _add_policy_arguments(record)
    replay = modes.add_parser("replay", help="answer from a recording, keylessly")
    replay.add_argument("--root", required=True, help="folder holding the recording")
    replay.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    replay.add_argument(
        "--accept-drift",
        action="store_true",
        help="answer a request that differs from the recorded one (prompt, system prompt, "
        "tools, model settings) with the recorded answer instead of refusing it; the "
        "report lists each such difference under 'accepted'",
    )
    for command in (record, replay):
        _add_scrub_arguments(command)
    return parser


def _assignment(what: str) -> Callable[[str], tuple[str, str]]:
    def parse(text: str) -> tuple[str, str]:
        try:
            return parse_assignment(text, what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return value


def _add_policy_arguments(command: argparse.ArgumentParser) -> None:
    # The key is spent on what the agent asks: these bound it (red team 4 F11).
    command.add_argument(
        "--max-calls",
        type=_positive,
        default=DEFAULT_MAX_CALLS,
        metavar="M",
        help=f"refuse (HTTP 429) model calls past the M-th (default: {DEFAULT_MAX_CALLS})",
    )
    command.add_argument(
        "--max-in-flight",
        type=_positive,
        default=DEFAULT_MAX_IN_FLIGHT,
        metavar="K",
        help=f"refuse (HTTP 429) a call while K are in flight (default: {DEFAULT_MAX_IN_FLIGHT})",
    )
    command.add_argument(
        "--max-tokens",
        type=_positive,
        default=DEFAULT_MAX_TOKENS,
        metavar="T",
        help="refuse (HTTP 400) a call whose max_tokens or max_completion_tokens is over T "
        f"(default: {DEFAULT_MAX_TOKENS})",
    )
    command.add_argument(
        "--model",
        help="refuse (HTTP 400) a call for any other model (default: any model)",
    )


def _add_scrub_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--literal",
        type=_assignment("--literal"),
        action="append",
        default=[],
        metavar="{{NAME}}=VALUE",
        help="replace VALUE (a path of this run) with {{NAME}} in what is written and "
        "compared; replay puts VALUE back into answers that hold {{NAME}} (repeatable)",
    )
    command.add_argument(
        "--scrub",
        type=_assignment("--scrub"),
        action="append",
        default=[],
        metavar="{{NAME}}=REGEX",
        help="replace every match of REGEX with {{NAME}} in what is written and compared "
        "(repeatable; applied in order, after --literal)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGINT / SIGTERM; print ``BASE_URL=…`` once listening.

    Returns:
        0 after a clean stop; 1 when a replay was not consumed exactly (the problems go to
        stderr); 2 on a usage or setup error.
    """
    args = _parser().parse_args(argv)
    try:
        scrub = Scrub.build(args.literal, args.scrub)
        if args.mode == "record":
            server = ProxyServer.record(
                args.root,
                store=args.store,
                upstream=args.upstream,
                api_key_env=args.api_key_env,
                port=args.port,
                scrub=scrub,
                policy=RecordPolicy(
                    max_in_flight=args.max_in_flight,
                    max_calls=args.max_calls,
                    max_tokens=args.max_tokens,
                    model=args.model,
                ),
            )
        else:
            server = ProxyServer.replay(
                args.root, port=args.port, scrub=scrub, accept_drift=args.accept_drift
            )
        base_url = server.base_url
    except (DshError, OSError, ValueError) as exc:
        print(f"dsh-llm-proxy: {exc}", file=sys.stderr)
        return 2
    server.serve_forever(ready=lambda: print(f"BASE_URL={base_url}", flush=True))
    problems = server.problems()
    for problem in problems:
        print(f"dsh-llm-proxy replay: not consumed: {problem}", file=sys.stderr)
    return 1 if problems else 0
