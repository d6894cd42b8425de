"""A stand-in for the agent's ``main`` in forked children: it mutates, or reports, process state.

Run by :class:`dsh_acp_agent.AgentForkServer` (``entry="fork_probe:main"``) from the isolation
tests. It reads one word on stdin: ``mutate`` changes module state the server imported, the
environment, the cwd, the temp dir and ``sys.modules``; ``report`` only reports;
``confinement`` also tries to reach what lies outside (``PROBE_UNIX_SOCKET``, a pathname socket;
``PROBE_TCP_PORT``, a host loopback listener; ``/dev/tty``) and reports its seccomp, privilege
and capability state. Either way it
prints what it sees as one JSON line before exiting with code 7 (and, when
``PROBE_ATEXIT_MARK`` names a file, writes the word there from an ``atexit`` handler).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

import dsh_acp_agent._server as server_module

mutations = 0
"""Module state of this (pre-imported) module: bumped by ``mutate``."""


def _state() -> dict[str, object]:
    return {
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "protocol_version": server_module.PROTOCOL_VERSION,
        "counter": mutations,
        "leaked_module": "fork_probe_leak" in sys.modules,
        "tempdir": tempfile.gettempdir(),
        "proc_environ": Path("/proc/self/environ").read_bytes().decode(errors="replace"),
        "session_leader": os.getsid(0) == os.getpid(),
        # What every descriptor beyond the three pipes leads to.
        "inherited": _inherited(),
    }


def _inherited() -> list[str]:
    links: list[str] = []
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            links += [os.readlink(f"/proc/self/fd/{fd}")] if fd > 2 else []
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            continue
    return links


def _attempt(action: str) -> str:
    """``ok``, or the errno name an attempt to reach something outside failed with."""
    try:
        if action == "unix":
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(os.environ["PROBE_UNIX_SOCKET"])
        elif action == "foreign":
            Path(os.environ["PROBE_FOREIGN_FILE"]).read_bytes()
        elif action == "tcp":
            with socket.create_connection(("127.0.0.1", int(os.environ["PROBE_TCP_PORT"])), 5):
                pass
        else:
            os.close(os.open("/dev/tty", os.O_RDWR))
    except OSError as exc:
        return os.strerror(exc.errno) if exc.errno else str(exc)
    return "ok"


def _confinement() -> dict[str, object]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    written = Path("probe-wrote-this")
    written.write_text("x")
    return {
        "unix": _attempt("unix"),
        "tcp": _attempt("tcp"),
        "tty": _attempt("tty"),
        "foreign": _attempt("foreign") if "PROBE_FOREIGN_FILE" in os.environ else "",
        "no_new_privs": status["NoNewPrivs"].strip(),
        "seccomp": status["Seccomp"].strip(),
        "cap_eff": status["CapEff"].strip(),
        "uid": os.getuid(),
        "file_owner": written.stat().st_uid,
    }


def main() -> None:
    global mutations  # noqa: PLW0603 - mutating module state is the point
    word = sys.stdin.readline().strip()
    mark = os.environ.get("PROBE_ATEXIT_MARK")
    if mark:  # a child must exit like an interpreter: its atexit handlers run
        atexit.register(Path(mark).write_text, word)
    if word == "mutate":
        mutations += 1
        server_module.PROTOCOL_VERSION = 99
        os.environ["PROBE_LEAK"] = "leaked"
        os.chdir("/")
        sys.modules["fork_probe_leak"] = sys.modules[__name__]
        tempfile.tempdir = "/leaked-tmp"
    state = _state()
    if word == "confinement":
        state |= _confinement()
    print(json.dumps(state), flush=True)
    print(f"probe {word} done", file=sys.stderr, flush=True)
    raise SystemExit(7)
