"""A warm agent: one pre-imported parent that forks a fresh agent process per run.

Starting ``dsh-acp-agent`` costs an interpreter start and the imports of asyncio, pydantic,
pydantic-settings, the model client and the store: hundreds of milliseconds of CPU per process,
against a few milliseconds for the run itself. :class:`AgentForkServer` pays that once. It
starts a server process (``python -m dsh_acp_agent._forkserver``) that imports the agent and
then waits; each :meth:`AgentForkServer.spawn` hands it three pipe ends over a Unix socket
(``SCM_RIGHTS``), and the server forks a child that makes them its stdin, stdout and stderr,
enters the requested cwd, replaces its whole environment and runs the agent's ``main`` — a
process of its own, as fresh as a cold start except for the modules already imported (which
nothing mutates before the fork: the server runs no agent code itself).

The server is single-threaded (``fork`` is only safe then). Each socket to it is a *lane* that
runs one child at a time; :meth:`AgentForkServer.lane` opens another, so a gate's workers share
one server (one interpreter importing the agent, not one per worker) and their children run at
once. It reaps each child through a pidfd, so a kill it is asked for can never hit a reused
pid, and a child closes every lane and pidfd it inherited before anything else: it can reach
neither the server nor its siblings. :class:`ForkedAgent` is the client's handle on a child,
shaped like the parts of :class:`subprocess.Popen` a driver uses (``stdin``/``stdout``/
``stderr``, ``pid``, ``poll``, ``wait``, ``kill``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

from dsh_core import (
    ProcessConfinement,
    SandboxUnavailableError,
    confine_process,
    is_secret_name,
    plugins,
    prepare_process_confinement,
)
from dsh_core._process_confine import confinement_plan

__all__ = ["AgentForkServer", "ForkServerError", "ForkedAgent"]

AGENT_ENTRY = "dsh_acp_agent._main:main"
"""What a forked child runs: ``module:function``, called with no arguments."""
PRELOAD = ("dsh_acp_agent._main", "dsh_llm_replay")
"""What the server imports before it forks (everything a replayed run needs)."""

_MESSAGE_LIMIT = 1 << 20  # one request: the environment and a cwd


class ForkServerError(OSError):
    """The fork server did not start, answer or stay alive."""


# --- the client side --------------------------------------------------------------------------


def _keyless(env: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if not is_secret_name(name)}


class ForkedAgent:
    """One agent child of a fork server, driven like a :class:`subprocess.Popen`.

    Attributes:
        pid: the child's process id.
        stdin: its stdin (write end, binary, buffered).
        stdout: its stdout (read end, binary, buffered).
        stderr: its stderr (read end, binary, buffered).
        returncode: the exit code once known (negative: killed by that signal), else ``None``.
        cpu_seconds: the CPU time (user + system) the child and its reaped children used, once
            it has ended.
        maxrss_kb: the child's peak resident memory in KiB, once it has ended.
    """

    def __init__(self, server: AgentForkServer, pid: int, pipes: tuple[int, int, int]) -> None:
        self._server = server
        self.pid = pid
        self.stdin: IO[bytes] = open(pipes[0], "wb")  # noqa: SIM115 - closed by the driver
        self.stdout: IO[bytes] = open(pipes[1], "rb")  # noqa: SIM115
        self.stderr: IO[bytes] = open(pipes[2], "rb")  # noqa: SIM115
        self.returncode: int | None = None
        self.cpu_seconds = 0.0
        self.maxrss_kb = 0
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        """The exit code if the child has ended, else ``None`` (never blocks)."""
        return self._collect(0.0)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; its exit code.

        Raises:
            subprocess.TimeoutExpired: it did not end within ``timeout`` seconds.
        """
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"forked agent {self.pid}", timeout or 0.0)
        return code

    def send_signal(self, signum: int) -> None:
        """Signal the child unless it has ended (its parent signals it: the pid is not reused)."""
        with self._lock:
            if self.returncode is None:
                with contextlib.suppress(OSError):
                    self._server.sock.send(json.dumps({"signal": int(signum)}).encode())

    def kill(self) -> None:
        """SIGKILL the child unless it has ended."""
        self.send_signal(signal.SIGKILL)

    def _collect(self, timeout: float | None) -> int | None:
        with self._lock:
            if self.returncode is None:
                message = self._server.receive(timeout)
                if message is not None:
                    self.returncode = int(message.get("exit", -signal.SIGKILL))
                    self.cpu_seconds = float(message.get("cpu", 0.0))
                    self.maxrss_kb = int(message.get("maxrss_kb", 0))
                    self._server.busy = False
            return self.returncode


class AgentForkServer:
    """A pre-imported agent parent that forks one fresh agent process per :meth:`spawn`.

    The object is one lane of the server: one child at a time. :meth:`lane` opens another
    lane of the same server process; closing the server closes its lanes too.

    Args:
        start_timeout: seconds the server may take to import the agent and say it is ready.
        entry: ``module:function`` each child runs (the agent's ``main``; tests give a probe).
        preload: modules imported before any fork.
        env: the server's own environment (default: this process's without any
            credential-shaped variable, :func:`dsh_core.is_secret_name`); each child gets the
            environment passed to :meth:`spawn` instead. The server holds no key: a child's
            ``/proc/<pid>/environ`` is the server's, whatever :meth:`spawn` passes.
        stores: the store backends imported before any fork (default: every installed one);
            a child that opens another imports it itself.
    """

    def __init__(
        self,
        start_timeout: float = 120.0,
        *,
        entry: str = AGENT_ENTRY,
        preload: Sequence[str] = PRELOAD,
        env: Mapping[str, str] | None = None,
        stores: Sequence[str] | None = None,
    ) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.busy = False
        self._owner: AgentForkServer | None = None  # the server a lane was opened on
        self._lanes: list[AgentForkServer] = []
        config = json.dumps(
            {
                "fd": theirs.fileno(),
                "entry": entry,
                "preload": list(preload),
                "stores": None if stores is None else list(stores),
            }
        )
        try:
            self.process = subprocess.Popen(
                # -P: "-m" would put the caller's cwd (a scenario tree, for the gate) first on
                # sys.path, and a planted selectors.py or json.py would run here, unconfined.
                [sys.executable, "-P", "-m", "dsh_acp_agent._forkserver", config],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env=_keyless(os.environ) if env is None else dict(env),
            )
        finally:
            theirs.close()
        try:
            ready = self.receive(start_timeout)
        except (ForkServerError, ValueError):
            ready = None
        if ready is None or not ready.get("ready"):
            self.process.kill()
            self.close()
            raise ForkServerError(
                f"the agent fork server did not start within {start_timeout:g}s "
                f"(exit code {self.process.poll()}); its stderr is this process's"
            )

    def lane(self, timeout: float = 60.0) -> AgentForkServer:
        """Another lane of this server process: one more child at a time, without another
        interpreter importing the agent. Closing it stops only its own child.

        Raises:
            ForkServerError: the server is gone or did not open the lane within ``timeout``.
        """
        owner = self._owner or self
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(owner.sock, [json.dumps({"lane": True}).encode()], [theirs.fileno()])
        except OSError as exc:
            ours.close()
            raise ForkServerError(
                f"the agent fork server (pid {owner.process.pid}) is gone: {exc}"
            ) from exc
        finally:
            theirs.close()
        lane = object.__new__(AgentForkServer)
        lane.sock, lane.busy, lane.process = ours, False, owner.process
        lane._owner, lane._lanes = owner, []
        try:
            ready = lane.receive(timeout)
        except (ForkServerError, ValueError):
            ready = None
        if ready is None or not ready.get("ready"):
            ours.close()
            raise ForkServerError(
                f"the agent fork server (pid {owner.process.pid}) opened no lane within "
                f"{timeout:g}s (exit code {owner.process.poll()})"
            )
        owner._lanes.append(lane)
        return lane

    def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next message, or ``None`` if none came within ``timeout`` seconds.

        Raises:
            ForkServerError: the server has gone away.
        """
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        data = self.sock.recv(_MESSAGE_LIMIT)
        if not data:
            raise ForkServerError(
                f"the agent fork server (pid {self.process.pid}) went away "
                f"(exit code {self.process.poll()})"
            )
        return cast(dict[str, Any], json.loads(data))

    def spawn(
        self,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float = 60.0,
        *,
        confinement: ProcessConfinement | None = None,
    ) -> ForkedAgent:
        """Fork a fresh agent in ``cwd`` with exactly ``env``; its handle.

        The child confines itself before it runs any agent code (:func:`dsh_core.confine_process`:
        namespaces, a read-only file system where only ``cwd``, ``env``'s ``TMPDIR`` and
        ``DSH_SESSIONS_ROOT`` and the confinement's ``writable`` folders are writable,
        ``no_new_privs``, the seccomp filter). ``confinement`` says how; by default the host
        network is kept (a model client may need it) and the mode is ``env``'s
        ``DSH_SANDBOX`` (``warn`` when unset).

        Raises:
            ForkServerError: the server is still running a child, or did not answer.
        """
        if self.busy:
            raise ForkServerError("the fork server is still running a child: wait for it first")
        ours: list[int] = []
        theirs: list[int] = []
        for child_reads in (True, False, False):
            read_end, write_end = os.pipe()
            ours.append(write_end if child_reads else read_end)
            theirs.append(read_end if child_reads else write_end)
        try:
            if confinement is None:
                mode = env.get("DSH_SANDBOX", "warn")
                confinement = ProcessConfinement(mode=mode if mode in ("strict", "off") else "warn")
            request = json.dumps(
                {"cwd": str(cwd), "env": dict(env), "confine": confinement.to_json()}
            ).encode()
            socket.send_fds(self.sock, [request], theirs)
        except OSError as exc:
            for fd in ours:
                os.close(fd)
            raise ForkServerError(
                f"the agent fork server (pid {self.process.pid}) is gone: {exc}"
            ) from exc
        finally:
            for fd in theirs:
                os.close(fd)
        answer = self.receive(timeout)
        if answer is None or "pid" not in answer:
            for fd in ours:
                os.close(fd)
            raise ForkServerError(f"the fork server did not fork: {answer or 'no answer'}")
        self.busy = True
        return ForkedAgent(self, int(answer["pid"]), (ours[0], ours[1], ours[2]))

    def close(self) -> None:
        """Close this lane (its running child is killed). On the server itself: close every
        lane, then stop the server (once every child is reaped) and reap it."""
        for lane in self._lanes:
            with contextlib.suppress(OSError):
                lane.sock.close()
        with contextlib.suppress(OSError):
            self.sock.close()
        if self._owner is not None:
            return
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> AgentForkServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# --- the server side --------------------------------------------------------------------------


def _resolve(entry: str) -> Any:
    module, _, function = entry.partition(":")
    return getattr(importlib.import_module(module), function)


def _child(
    inherited: list[int],
    fds: list[int],
    request: dict[str, Any],
    entry: str,
) -> None:
    """In the forked child: confine itself, become a fresh agent process; never returns.

    ``inherited``: the server's descriptors (every lane's socket, every sibling's pidfd),
    closed first: a child must not be able to ask the server for anything or signal a sibling.
    """
    cwd, env = str(request["cwd"]), cast(dict[str, str], request["env"])
    code = 70  # EX_SOFTWARE: the child could not even start the agent
    server = os.getppid()
    try:
        # A session of its own (no controlling terminal, out of the gate's process group):
        # what bubblewrap's --new-session gives a sandboxed command.
        os.setsid()
        for fd in inherited:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        # Before any agent code, while this process is still single-threaded (a user
        # namespace refuses a threaded one).
        try:
            confinement = ProcessConfinement.from_json(request.get("confine", {}))
            missing = confine_process(confinement, cwd, env)
        except SandboxUnavailableError as exc:
            os.write(2, f"dsh-acp-agent: {exc}\n".encode())
            raise SystemExit(71) from None  # EX_OSERR
        if missing:
            os.write(2, f"dsh-acp-agent: confined without {'; '.join(missing)}\n".encode())
        # Killed when the server dies (bubblewrap's --die-with-parent). Set after the
        # confinement: a new user namespace changes the credentials, which clears it.
        _die_with_parent()
        if os.getppid() != server:  # the server died before the signal was armed
            raise SystemExit(70)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # recomputed from this child's TMPDIR, not the server's
        sys.argv = ["dsh-acp-agent"]
        _resolve(entry)()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # reported on the child's stderr, then the child exits
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        code = 1
    finally:
        # As at a normal interpreter exit: atexit handlers run (the bash sandbox removes its
        # private home from one), then the streams are flushed; os._exit then skips the rest
        # of the server's own shutdown, which is not this child's to do.
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: PLC0415 - Linux only, in the child

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    # A client gone meanwhile is seen as the end of its lane at the next select: one lane's
    # client must never bring the server (and every other lane's child) down.
    with contextlib.suppress(OSError):
        sock.send(json.dumps(message).encode())


class _Lane:
    """One client socket of the server, and the child it runs (if any)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.open = True  # False once the client closed it: its child is killed, not reported


def _fork(
    lane: _Lane, lanes: list[_Lane], fds: list[int], request: dict[str, Any], entry: str
) -> None:
    inherited = [other.sock.fileno() for other in lanes]
    inherited += [other.pidfd for other in lanes if other.pidfd is not None]
    with contextlib.suppress(ValueError, TypeError, KeyError):  # the child reports those
        # What is hidden and lent whatever the run is worked out here, once for all the
        # children (cached in the server), not in each of them.
        confine = ProcessConfinement.from_json(request.get("confine", {}))
        confinement_plan(confine, str(request["cwd"]), cast(dict[str, str], request["env"]))
    # The server's objects out of the collector's reach: a collection in the child would
    # otherwise write to every one of them and copy nearly every page of the server.
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        _child(inherited, fds, request, entry)
    for fd in fds:
        os.close(fd)
    # Not yet reaped, the pid stays this child's: the pidfd and every kill name it.
    lane.pid, lane.pidfd = pid, os.pidfd_open(pid)
    _send(lane.sock, {"pid": pid})


def _reap(lane: _Lane) -> None:
    """The lane's child has ended: reap it and report its exit (unless the client is gone)."""
    assert lane.pid is not None
    assert lane.pidfd is not None
    os.close(lane.pidfd)
    _, status, usage = os.wait4(lane.pid, 0)
    lane.pid = lane.pidfd = None
    if lane.open:
        cpu = usage.ru_utime + usage.ru_stime
        exit_code = os.waitstatus_to_exitcode(status)
        report = {"exit": exit_code, "cpu": cpu, "maxrss_kb": usage.ru_maxrss}
        _send(lane.sock, report)


def _message(lane: _Lane, lanes: list[_Lane], entry: str) -> None:
    """One request on ``lane``: fork a child, signal it, open a lane; or the client is gone."""
    try:
        data, fds, _, _ = socket.recv_fds(lane.sock, _MESSAGE_LIMIT, 3)
    except OSError:
        data, fds = b"", []
    if not data:
        for fd in fds:
            os.close(fd)
        lane.open = False
        if lane.pid is not None:
            os.kill(lane.pid, signal.SIGKILL)  # reaped (and the lane dropped) once it ends
        return
    request = json.loads(data)
    if request.get("lane") and len(fds) == 1:
        new = _Lane(socket.socket(fileno=fds[0]))
        lanes.append(new)
        _send(new.sock, {"ready": True, "pid": os.getpid()})
    elif "cwd" in request and lane.pid is None and len(fds) == 3:
        _fork(lane, lanes, fds, request, entry)
    else:
        for fd in fds:
            os.close(fd)
        if "signal" in request and lane.pid is not None:
            os.kill(lane.pid, int(request["signal"]))
        elif "cwd" in request:
            _send(lane.sock, {"error": "this lane is still running a child"})
        # else a late signal for a child already reaped: nothing to do


def serve(sock: socket.socket, entry: str) -> None:
    """Fork one child per request, one at a time per lane, until every lane is closed and
    every child reaped."""
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    lanes = [_Lane(sock)]
    while lanes:
        requests = {lane.sock.fileno(): lane for lane in lanes if lane.open}
        exits = {lane.pidfd: lane for lane in lanes if lane.pidfd is not None}
        ready, _, _ = select.select([*requests, *exits], [], [])
        for fd in ready:
            if fd in exits and exits[fd].pidfd == fd:
                _reap(exits[fd])
            elif fd in requests and requests[fd].open:
                _message(requests[fd], lanes, entry)
        for lane in [lane for lane in lanes if not lane.open and lane.pid is None]:
            lanes.remove(lane)
            lane.sock.close()


def main(argv: Sequence[str]) -> None:
    """``python -m dsh_acp_agent._forkserver CONFIG``: import, say ready, serve."""
    config = json.loads(argv[0])
    sock = socket.socket(fileno=int(config["fd"]))
    for module in config["preload"]:
        importlib.import_module(module)
    # Every child inherits the entry point lookup, the store modules and the model providers.
    plugins.preload(config.get("stores"))
    from dsh_acp_agent._server import package_version  # noqa: PLC0415 - the server's side only

    package_version()  # every agent reads it (its initialize answer): once, here
    prepare_process_confinement()  # libseccomp compiles the filters once, not per child
    _resolve(config["entry"])  # fail here, once, rather than in every child
    serve(sock, str(config["entry"]))


if __name__ == "__main__":
    main(sys.argv[1:])
