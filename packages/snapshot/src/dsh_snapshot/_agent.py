"""Driving ``dsh-acp-agent`` as a real subprocess over JSON-RPC (ACP) on stdio.

Frames are read by a thread into a queue, so every wait has a timeout and a stuck agent becomes
a clear :class:`AgentError` instead of a hung gate.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_core import DshError
from dsh_snapshot._scenario import Step

__all__ = ["AgentError", "AgentProcess", "agent_command"]

_EOF = object()


def as_object(value: Any) -> dict[str, Any] | None:
    """``value`` as a JSON object, or ``None`` when it is something else."""
    if isinstance(value, dict):
        return value  # pyright: ignore[reportUnknownVariableType]
    return None


class AgentError(DshError):
    """The agent misbehaved: a timeout, a bad frame, an unexpected response, a bad exit."""


def agent_command() -> list[str]:
    """The command that starts the agent: the console script next to this interpreter."""
    script = Path(sys.executable).with_name("dsh-acp-agent")
    if script.is_file():
        return [str(script)]
    found = shutil.which("dsh-acp-agent")
    if found:
        return [found]
    return [sys.executable, "-m", "dsh_acp_agent"]


class AgentProcess:
    """One agent subprocess; records every frame it writes to stdout, in order.

    Args:
        cwd: the process's working directory (the scenario's temporary cwd).
        env: the complete environment of the process.
        timeout: seconds any single wait (a frame, the exit) may take.
        start_timeout: seconds the first frame may take (interpreter start-up and imports are
            slow on a loaded machine and are not what a per-wait timeout is about).
    """

    def __init__(
        self, cwd: Path, env: Mapping[str, str], timeout: float, start_timeout: float = 120.0
    ) -> None:
        self.cwd = cwd
        self.timeout = timeout
        self.start_timeout = start_timeout
        self._started = False
        self.frames: list[Any] = []
        self.session_ids: list[str] = []
        self._next_id = 0
        self._queue: queue.Queue[Any] = queue.Queue()
        self._stderr: list[bytes] = []
        self._proc = subprocess.Popen(
            agent_command(),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # --- plumbing ------------------------------------------------------------------------------

    def _pump_stdout(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._queue.put(raw)
        self._queue.put(_EOF)

    def _pump_stderr(self) -> None:
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            self._stderr.append(raw)

    @property
    def stderr(self) -> str:
        """Everything the agent wrote to stderr so far."""
        return b"".join(self._stderr).decode("utf-8", "replace")

    def _send(self, frame: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(frame) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise AgentError(
                f"the agent closed its stdin ({exc}); stderr: {self._tail()}"
            ) from None

    def _tail(self) -> str:
        text = self.stderr.strip()
        return text[-2000:] if text else "(empty)"

    def _read_frame(self, waiting_for: str) -> Any:
        wait = self.timeout if self._started else max(self.timeout, self.start_timeout)
        try:
            raw = self._queue.get(timeout=wait)
        except queue.Empty:
            raise AgentError(
                f"timed out after {wait:g}s waiting for {waiting_for}; stderr: {self._tail()}"
            ) from None
        if raw is _EOF:
            code = self._proc.poll()
            raise AgentError(
                f"the agent closed stdout (exit code {code}) while waiting for "
                f"{waiting_for}; stderr: {self._tail()}"
            )
        try:
            frame: Any = json.loads(raw)
        except ValueError:
            raise AgentError(f"the agent wrote a non-JSON line to stdout: {raw[:200]!r}") from None
        self._started = True
        self.frames.append(frame)
        obj = as_object(frame)
        if obj is not None and "method" in obj and obj.get("id") is not None:
            # A request from the agent to us (permissions, fs…): this client offers none.
            self._send(
                {
                    "jsonrpc": "2.0",
                    "id": obj["id"],
                    "error": {"code": -32601, "message": "method not found"},
                }
            )
        return frame

    def request(self, method: str, params: dict[str, Any]) -> int:
        """Send a request; returns its id."""
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification."""
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_response(self, request_id: int, method: str) -> dict[str, Any]:
        """Read frames until the response to ``request_id``; returns it."""
        while True:
            frame = as_object(self._read_frame(f"the response to {method} (id {request_id})"))
            if frame is not None and frame.get("id") == request_id and "method" not in frame:
                return frame

    def wait_update(self, method: str, request_id: int) -> dict[str, Any] | None:
        """Read frames until the first ``session/update``; ``None`` if the response came first."""
        while True:
            frame = as_object(
                self._read_frame(f"the first session/update of {method} (id {request_id})")
            )
            if frame is not None:
                if frame.get("method") == "session/update":
                    return frame
                if frame.get("id") == request_id and "method" not in frame:
                    return None

    # --- steps ---------------------------------------------------------------------------------

    def _session(self, step: Step) -> str:
        if not self.session_ids:
            raise AgentError(f"step {step.op} needs a session: add a newSession step before it")
        return self.session_ids[-1]

    def _ok(self, response: dict[str, Any], method: str) -> dict[str, Any]:
        if "error" in response:
            raise AgentError(
                f"{method} failed: {json.dumps(response['error'])}; stderr: {self._tail()}"
            )
        result = response.get("result")
        return result if isinstance(result, dict) else {}  # pyright: ignore

    def run_step(self, step: Step) -> None:
        """Drive one ``input.json`` step.

        Raises:
            AgentError: the agent answered wrongly, or not in time.
        """
        prompt = [{"type": "text", "text": step.text or ""}]
        if step.op == "initialize":
            rid = self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            self._ok(self.wait_response(rid, "initialize"), "initialize")
        elif step.op == "newSession":
            rid = self.request("session/new", {"cwd": str(self.cwd), "mcpServers": []})
            result = self._ok(self.wait_response(rid, "session/new"), "session/new")
            sid = result.get("sessionId")
            if not isinstance(sid, str):
                raise AgentError(f"session/new returned no sessionId: {json.dumps(result)}")
            self.session_ids.append(sid)
        elif step.op == "loadSession":
            sid = self._session(step)
            rid = self.request(
                "session/load", {"sessionId": sid, "cwd": str(self.cwd), "mcpServers": []}
            )
            self._ok(self.wait_response(rid, "session/load"), "session/load")
        elif step.op == "prompt":
            rid = self.request(
                "session/prompt", {"sessionId": self._session(step), "prompt": prompt}
            )
            self._ok(self.wait_response(rid, "session/prompt"), "session/prompt")
        elif step.op == "promptExpectError":
            rid = self.request(
                "session/prompt", {"sessionId": self._session(step), "prompt": prompt}
            )
            response = self.wait_response(rid, "session/prompt")
            if "error" not in response:
                raise AgentError(
                    f"promptExpectError: session/prompt succeeded but an error "
                    f"response was expected: {json.dumps(response)}"
                )
        elif step.op == "promptAndCancel":
            sid = self._session(step)
            rid = self.request("session/prompt", {"sessionId": sid, "prompt": prompt})
            if self.wait_update("session/prompt", rid) is None:
                raise AgentError(
                    "promptAndCancel: the prompt finished before any "
                    "session/update, so there was nothing to cancel"
                )
            self.notify("session/cancel", {"sessionId": sid})
            self._ok(self.wait_response(rid, "session/prompt"), "session/prompt")
        else:  # cancel
            self.notify("session/cancel", {"sessionId": self._session(step)})

    def finish(self) -> int:
        """Close stdin, drain stdout, wait for the exit; returns the exit code.

        Raises:
            AgentError: the agent did not exit in time (it is killed) or wrote bad frames.
        """
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        while True:
            try:
                raw = self._queue.get(timeout=self.timeout)
            except queue.Empty:
                self.kill()
                raise AgentError(
                    f"the agent did not exit within {self.timeout:g}s after stdin "
                    f"closed; stderr: {self._tail()}"
                ) from None
            if raw is _EOF:
                break
            try:
                self.frames.append(json.loads(raw))
            except ValueError:
                raise AgentError(
                    f"the agent wrote a non-JSON line to stdout: {raw[:200]!r}"
                ) from None
        try:
            code = self._proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AgentError(
                f"the agent did not exit within {self.timeout:g}s after stdin "
                f"closed; stderr: {self._tail()}"
            ) from None
        for thread in self._threads:
            thread.join(timeout=self.timeout)
        return code

    def kill(self) -> None:
        """Kill the process (idempotent) and close its pipes."""
        if self._proc.poll() is None:
            self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The process environment minus every ``DSH_*``/``DEEPSEEK_*`` variable, plus ``extra``.

    A scenario must not depend on what the caller happens to have exported, and a replay must
    never see a real key.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}
    env.update(extra)
    return env
