"""The driver of a real ``dsh-acp-agent`` subprocess (see :mod:`dsh_acp_agent.testing`)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from dsh_acp_agent._forkserver import AgentForkServer, ForkedAgent
from dsh_core import (
    ALLOW_MODEL_REQUESTS_ENV,
    ProcessConfinement,
    SessionLog,
    confined_command,
    read_log_text,
)
from dsh_core.plugins import (
    DEFAULT_STORE_BACKEND,
    model_env_prefixes,
    store_backend,
    store_env_prefixes,
)

__all__ = [
    "AgentProcess",
    "AgentProcessError",
    "AgentRun",
    "DeadlineError",
    "ResponseError",
    "agent_environment",
]

JsonObject = dict[str, Any]

_WAIT_S = 120.0  # a safety net against a hung agent, not a timing assertion
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""The longest stdout line (one JSON-RPC frame) read from an agent; a longer one stops it."""
MAX_STDOUT_BYTES = 512 * 1024 * 1024
"""All an agent may write to stdout in one run; past it the agent is stopped."""
STDERR_KEPT_BYTES = 256 * 1024
"""How much of an agent's stderr is kept (the end of it): enough for any failure message."""


class AgentProcessError(AssertionError):
    """The agent process misbehaved: no frame in time, stdout closed early, no exit in time."""


class DeadlineError(AgentProcessError):
    """The run's deadline (``AgentProcess.deadline``) passed while the agent was still working.

    Attributes:
        waiting_for: what was being waited for.
    """

    def __init__(self, waiting_for: str, stderr_tail: str) -> None:
        super().__init__(
            f"the run reached its deadline while waiting for {waiting_for} (the agent kept "
            f"speaking, never finishing); stderr: {stderr_tail}"
        )
        self.waiting_for = waiting_for


class ResponseError(AssertionError):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, method: str, error: JsonObject) -> None:
        super().__init__(f"{method} failed: {json.dumps(error)}")
        self.error = error


def agent_environment(overrides: Mapping[str, str]) -> dict[str, str]:
    """This environment minus every ``DSH_*`` variable and every installed model provider's
    (``OPENAI_*``…), plus ``overrides``.

    Kept: ``DSH_ALLOW_MODEL_REQUESTS`` (a test run's "no live calls" reaches its agents) and
    the variables of every installed store backend's ``env_prefixes`` (``DSH_POSTGRES_*``,
    ``PG*``): the agent must reach the store its caller configured, as a server store's
    address is no part of a scenario.
    """
    dropped = ("DSH_", *model_env_prefixes())
    kept = store_env_prefixes()
    env = {
        key: value
        for key, value in os.environ.items()
        if key == ALLOW_MODEL_REQUESTS_ENV
        or (kept and key.startswith(kept))
        or not key.startswith(dropped)
    }
    env.update(overrides)
    return env


class AgentProcess:
    """A running agent subprocess and everything it has written.

    Two reader threads collect stdout and stderr as they arrive; the waits below walk the frames
    in arrival order behind a cursor, so "the next ``session/update``" means the next one not
    yet waited past. A request the agent sends to us (permissions, files) is refused with
    "method not found" at once: this client offers no such capability.

    A misbehaving process raises :class:`AgentProcessError` and an error answer
    :class:`ResponseError`; a tool that wants its own error types wraps the driver and
    translates these two at its boundary (as ``dsh_snapshot`` does).

    Args:
        env: the complete environment of the process (see :func:`agent_environment`).
        cwd: its working directory.
        command: how to start it (default: this interpreter with ``-m dsh_acp_agent``).
        timeout: seconds any single wait (the next frame, the exit) may take.
        start_timeout: seconds the first frame may take (interpreter start-up and imports are
            slow on a loaded machine, and are not what ``timeout`` is about).
        fork_server: start the agent as a child forked from this warm server instead of a
            fresh interpreter (see :class:`dsh_acp_agent.AgentForkServer`).
        pass_fds: descriptors the process inherits (a sandbox's, see
            :class:`dsh_core.ConfinedCommand`).
        confinement: how the agent confines itself: a forked child after the fork (see
            :meth:`dsh_acp_agent.AgentForkServer.spawn`; its default when ``None``), a fresh
            interpreter through the launcher of :func:`dsh_core.confined_command` before it
            starts (unconfined when ``None``).
        deadline: ``time.monotonic()`` by which everything must be over, however often the
            agent speaks (each wait is cut to it; past it a wait fails); ``None``: no bound
            but the per-wait ones.

    Attributes:
        process: the subprocess.
        frames: every JSON-RPC frame read from stdout, in arrival order.
        stray_lines: stdout lines that were not JSON-RPC frames.
        session_ids: the ids :meth:`new_session` received, in order.
    """

    def __init__(
        self,
        env: Mapping[str, str],
        cwd: Path,
        command: Sequence[str] | None = None,
        *,
        timeout: float = _WAIT_S,
        start_timeout: float = _WAIT_S,
        fork_server: AgentForkServer | None = None,
        pass_fds: Sequence[int] = (),
        confinement: ProcessConfinement | None = None,
        deadline: float | None = None,
    ) -> None:
        argv = (
            list(command) if command is not None else [sys.executable, "-P", "-m", "dsh_acp_agent"]
        )
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.deadline = deadline
        self.frames: list[JsonObject] = []
        self.stray_lines: list[str] = []
        self.session_ids: list[str] = []
        # Bounded, whatever the agent writes: a foreign agent is untrusted, and its output
        # must not grow this (gate) process without limit before --timeout ends the run.
        self._stderr = bytearray()
        self._stderr_dropped = 0
        self._stdout_bytes = 0
        self._stdout_cut: str | None = None
        self._methods: dict[int, str] = {}
        self._next_id = 0
        self._cursor = 0  # frames[:_cursor] have been waited past
        # The first response to each id among frames[:_cursor]: response() looks an earlier
        # answer up here instead of rescanning every frame read so far (quadratic over a
        # long scenario).
        self._passed_responses: dict[int | str, JsonObject] = {}
        self._eof = False
        self._arrived = threading.Condition()
        self._write_lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | ForkedAgent
        if fork_server is not None:
            # Warm: a fresh child forked from a pre-imported agent (``command`` is not used).
            self.process = fork_server.spawn(
                cwd, env, timeout=max(timeout, start_timeout), confinement=confinement
            )
        else:
            if confinement is not None:
                # Cold: the same confinement as a forked child's, by a launcher that applies
                # it and then execs the agent.
                argv = confined_command(confinement, argv, str(cwd), env)
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env),
                cwd=cwd,
                pass_fds=tuple(pass_fds),
            )
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    # --- writing ----------------------------------------------------------------------------

    def send(self, method: str, params: JsonObject) -> int:
        """Write a request without waiting; return its id."""
        self._next_id += 1
        self._methods[self._next_id] = method
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: JsonObject) -> None:
        """Write a notification."""
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def _write(self, message: JsonObject) -> None:
        try:
            self._write_line(message)
        except (OSError, ValueError) as exc:  # ValueError: stdin already closed by finish()
            # The agent is gone; what it said last reaches the stderr reader a moment later on
            # a loaded machine, and the error is only useful with it.
            self._readers[1].join(timeout=min(self.timeout, 5.0))
            raise AgentProcessError(
                f"the agent closed its stdin ({exc}); stderr: {self.stderr_tail()}"
            ) from None

    def _write_line(self, message: JsonObject) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        with self._write_lock:  # the stdout reader refuses the agent's requests concurrently
            stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            stdin.flush()

    # --- waiting ----------------------------------------------------------------------------

    def request(self, method: str, params: JsonObject) -> JsonObject:
        """Send a request and return its ``result``.

        Raises:
            ResponseError: the agent answered with an error.
            AgentProcessError: no answer in time, or stdout closed first.
        """
        return self.result(self.send(method, params))

    def result(self, request_id: int) -> JsonObject:
        """Wait for the response to ``request_id``; return its ``result`` (``{}`` if not an object).

        Raises:
            ResponseError: the response is an error.
            AgentProcessError: no answer in time, or stdout closed first.
        """
        response = self.response(request_id)
        if "error" in response:
            method = self._methods.get(request_id, "request")
            raise ResponseError(method, cast(JsonObject, response["error"]))
        result = response.get("result")
        return cast(JsonObject, result) if isinstance(result, dict) else {}

    def response(self, request_id: int) -> JsonObject:
        """Wait for the response frame to ``request_id`` and return it (frames before it are kept).

        Raises:
            AgentProcessError: no answer in time, or stdout closed first.
        """
        earlier = self._passed_responses.get(request_id)
        if earlier is not None:
            return earlier
        method = self._methods.get(request_id, "request")
        while True:
            frame = self._next_frame(f"the response to {method} (id {request_id})")
            if _answers(frame, request_id):
                return frame

    def next_update(self, request_id: int, kind: str | None = None) -> JsonObject | None:
        """Wait for the next ``session/update`` (of ``kind``, e.g. ``agent_message_chunk``,
        when given); ``None`` if ``request_id`` was answered first.

        Raises:
            AgentProcessError: neither came in time, or stdout closed first.
        """
        method = self._methods.get(request_id, "request")
        what = f"the first {kind or 'session/update'} of {method} (id {request_id})"
        while True:
            frame = self._next_frame(what)
            if frame.get("method") == "session/update" and (
                kind is None or _update_kind(frame) == kind
            ):
                return frame
            if _answers(frame, request_id):
                return None

    def _cut(self, wait: float, waiting_for: str) -> float:
        """``wait``, cut to what is left before the deadline.

        Raises:
            AgentProcessError: the deadline has passed.
        """
        if self.deadline is None:
            return wait
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlineError(waiting_for, self.stderr_tail())
        return min(wait, left)

    def _next_frame(self, waiting_for: str) -> JsonObject:
        starting = not self.frames
        wait = (
            max(self.timeout, self.start_timeout)
            if starting
            else self._cut(self.timeout, waiting_for)
        )
        began = time.monotonic()
        arrived = self._wait_until(lambda: self._cursor < len(self.frames) or self._eof, wait)
        if starting and self.deadline is not None:
            # Start-up (an interpreter and its imports on a loaded machine) is start_timeout's
            # business, not the run's: the deadline moves on by what it took.
            self.deadline += time.monotonic() - began
        if not arrived:
            self._cut(wait, waiting_for)  # the deadline, if that is what ended the wait
            raise AgentProcessError(
                f"timed out after {wait:g}s waiting for {waiting_for}; stderr: {self.stderr_tail()}"
            )
        with self._arrived:
            closed = self._cursor == len(self.frames)
            if not closed:
                self._cursor += 1
                frame = self.frames[self._cursor - 1]
                frame_id = frame.get("id")
                if isinstance(frame_id, int | str) and "method" not in frame:
                    self._passed_responses.setdefault(frame_id, frame)
                return frame
        # stdout ended first; stderr and the exit code follow a moment later on a loaded
        # machine, and the error is only useful with them, so give both a short grace.
        self._readers[1].join(timeout=min(self.timeout, 5.0))
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=min(self.timeout, 5.0))
        if self._stdout_cut is not None:
            raise AgentProcessError(f"{self._stdout_cut}, while waiting for {waiting_for}")
        raise AgentProcessError(
            f"the agent closed stdout (exit code {self.process.poll()}) while waiting for "
            f"{waiting_for}; stderr: {self.stderr_tail()}"
        )

    def _wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        with self._arrived:
            return self._arrived.wait_for(ready, timeout=timeout)

    # --- the ACP methods ------------------------------------------------------------------

    def initialize(self, client_capabilities: JsonObject | None = None) -> JsonObject:
        """``initialize`` with protocol version 1 and ``client_capabilities`` (default none);
        its result."""
        params = {"protocolVersion": 1, "clientCapabilities": client_capabilities or {}}
        return self.request("initialize", params)

    def send_new_session(self, cwd: Path, **extra: Any) -> int:
        """Write a ``session/new`` in ``cwd`` without MCP servers, plus ``extra`` params
        (e.g. ``additionalDirectories``), without waiting; return its id."""
        return self.send("session/new", {"cwd": str(cwd), "mcpServers": [], **extra})

    def new_session(self, cwd: Path) -> str:
        """``session/new`` in ``cwd`` without MCP servers; the new id (kept in ``session_ids``)."""
        result = self.result(self.send_new_session(cwd))
        session_id = result.get("sessionId")
        if not isinstance(session_id, str):
            raise AgentProcessError(f"session/new returned no sessionId: {json.dumps(result)}")
        self.session_ids.append(session_id)
        return session_id

    def load_session(self, session_id: str, cwd: Path) -> JsonObject:
        """``session/load`` of ``session_id`` in ``cwd`` without MCP servers; its result."""
        params: JsonObject = {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
        return self.request("session/load", params)

    def send_prompt(self, session_id: str, text: str) -> int:
        """Write a ``session/prompt`` of one text block without waiting; return its id."""
        return self.send(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    def prompt(self, session_id: str, text: str) -> JsonObject:
        """``session/prompt`` of one text block; its result once the turn is over."""
        return self.result(self.send_prompt(session_id, text))

    def updates(self, session_id: str | None = None) -> list[JsonObject]:
        """The ``update`` objects of every ``session/update`` read so far."""
        return [
            cast(JsonObject, frame["params"]["update"])
            for frame in self.frames
            if frame.get("method") == "session/update"
            and (session_id is None or frame["params"].get("sessionId") == session_id)
        ]

    # --- ending ----------------------------------------------------------------------------

    def finish(self) -> int:
        """Close stdin, read stdout to its end, wait for the exit; return the exit code.

        Raises:
            AgentProcessError: the agent did not exit in time (it is killed).
        """
        with self._write_lock, contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        failure = f"the agent did not exit within {self.timeout:g}s after stdin closed; stderr: "
        # Each wait is for the next line, as everywhere else: a slow but live agent may go on.
        while not self._eof:
            seen = self._lines_read()
            try:
                wait = self._cut(self.timeout, "the agent to exit")
            except AgentProcessError:
                self.kill()
                raise
            if not self._wait_until(functools.partial(self._moved_on, seen), wait):
                self.kill()
                raise AgentProcessError(failure + self.stderr_tail())
        try:
            code = self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AgentProcessError(failure + self.stderr_tail()) from None
        for reader in self._readers:
            reader.join(timeout=self.timeout)
        return code

    def kill(self) -> None:
        """Kill the process if it still runs and close its pipes (idempotent)."""
        if self.process.poll() is None:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        # The readers end at EOF; closing their pipes under them would fail mid-read.
        for reader in self._readers:
            reader.join(timeout=5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    @property
    def stderr(self) -> str:
        """What the agent wrote to stderr so far: all of it, or its last
        :data:`STDERR_KEPT_BYTES` after a note of how much was dropped."""
        text = bytes(self._stderr).decode("utf-8", "replace")
        if self._stderr_dropped:
            return f"[{self._stderr_dropped} earlier bytes of stderr dropped]\n{text}"
        return text

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters of stderr, stripped; ``(empty)`` when there are none."""
        text = self.stderr.strip()
        return text[-limit:] if text else "(empty)"

    def __enter__(self) -> AgentProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()

    # --- the reader threads -------------------------------------------------------------------

    def _lines_read(self) -> int:
        return len(self.frames) + len(self.stray_lines)

    def _moved_on(self, lines_seen: int) -> bool:
        return self._eof or self._lines_read() > lines_seen

    def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        with contextlib.suppress(OSError, ValueError):  # the pipe closed under us by kill()
            while raw := stdout.readline(MAX_FRAME_BYTES + 1):
                self._stdout_bytes += len(raw)
                if (cut := self._past_bounds(raw)) is not None:
                    with self._arrived:
                        self._stdout_cut = cut
                    self.process.kill()  # nothing it says from here on is read
                    break
                line = raw.decode("utf-8", "replace")
                frame = _as_frame(line)
                with self._arrived:
                    if frame is None:
                        self.stray_lines.append(line)
                    else:
                        self.frames.append(frame)
                    self._arrived.notify_all()
                if frame is not None and "method" in frame and frame.get("id") is not None:
                    self._refuse(frame["id"])
        with self._arrived:
            self._eof = True
            self._arrived.notify_all()

    def _past_bounds(self, raw: bytes) -> str | None:
        if len(raw) > MAX_FRAME_BYTES:
            return f"the agent wrote a stdout line over {MAX_FRAME_BYTES} bytes; it was stopped"
        if self._stdout_bytes > MAX_STDOUT_BYTES:
            return f"the agent wrote over {MAX_STDOUT_BYTES} bytes to stdout; it was stopped"
        return None

    def _refuse(self, request_id: Any) -> None:
        error = {"code": -32601, "message": "method not found"}
        with contextlib.suppress(OSError, ValueError):  # stdin closed: nobody is waiting
            self._write_line({"jsonrpc": "2.0", "id": request_id, "error": error})

    def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        read = getattr(stderr, "read1", stderr.read)  # whatever is there, never a whole line
        with contextlib.suppress(OSError, ValueError):
            while chunk := read(65536):
                self._stderr += chunk
                if (over := len(self._stderr) - STDERR_KEPT_BYTES) > 0:
                    del self._stderr[:over]
                    self._stderr_dropped += over


def _as_frame(line: str) -> JsonObject | None:
    """``line`` as a JSON-RPC 2.0 frame, or ``None`` when it is not one."""
    try:
        frame: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(frame, dict) or cast(JsonObject, frame).get("jsonrpc") != "2.0":
        return None
    return cast(JsonObject, frame)


def _update_kind(frame: JsonObject) -> Any:
    params = frame.get("params")
    update = cast(JsonObject, params).get("update") if isinstance(params, dict) else None
    return cast(JsonObject, update).get("sessionUpdate") if isinstance(update, dict) else None


def _answers(frame: JsonObject, request_id: int) -> bool:
    """Whether ``frame`` is the response to our request ``request_id``."""
    return frame.get("id") == request_id and "method" not in frame


@dataclass
class AgentRun:
    """What a test needs around one agent process: its workspace and its sessions root."""

    workspace: Path
    sessions_root: Path
    env: dict[str, str]

    def start(self, **overrides: str) -> AgentProcess:
        """Start an agent process with ``overrides`` added to the environment."""
        return AgentProcess({**self.env, **overrides}, self.workspace)

    def finish(self, agent: AgentProcess) -> None:
        """Close the agent's stdin; check it exited 0 having written only JSON-RPC frames."""
        code = agent.finish()
        assert code == 0, agent.stderr
        assert agent.stray_lines == [], agent.stray_lines

    def log(self, session_id: str) -> SessionLog:
        """The stored log of ``session_id``, exported by the run's store backend."""
        backend = store_backend(self.env.get("DSH_STORE", DEFAULT_STORE_BACKEND))
        return read_log_text(backend.export_log(self.sessions_root, session_id), session_id)

    def logs(self) -> list[SessionLog]:
        """Every stored log, ordered by ``(createdAt, id)``."""
        backend = store_backend(self.env.get("DSH_STORE", DEFAULT_STORE_BACKEND))
        return [self.log(header.id) for header in backend.list_sessions(self.sessions_root)]
