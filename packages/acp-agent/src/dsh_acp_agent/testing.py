"""A driver for a real ``dsh-acp-agent`` subprocess, for tests and tools.

``AgentProcess`` starts the agent, writes JSON-RPC requests to its stdin and reads every frame
it writes to stdout, keeping them all (in order) for comparison. Lines on stdout that are not
JSON-RPC frames are kept apart in :attr:`AgentProcess.stray_lines`: there must be none.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from dsh_core import Chunk, SessionLog, Usage, read_log_text

__all__ = [
    "AgentProcess",
    "AgentRun",
    "ResponseError",
    "agent_environment",
    "text_reply",
    "tool_reply",
]

JsonObject = dict[str, Any]

_WAIT_S = 120.0  # a safety net against a hung agent, not a timing assertion


class ResponseError(AssertionError):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, method: str, error: JsonObject) -> None:
        super().__init__(f"{method} failed: {json.dumps(error)}")
        self.error = error


def agent_environment(overrides: Mapping[str, str]) -> dict[str, str]:
    """This environment minus every ``DSH_*``/``DEEPSEEK_*`` variable, plus ``overrides``."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("DSH_", "DEEPSEEK_"))
    }
    env.update(overrides)
    return env


class AgentProcess:
    """A running agent subprocess and everything it has written.

    Args:
        env: the complete environment of the process (see :func:`agent_environment`).
        cwd: its working directory.
        command: how to start it (default: this interpreter with ``-m dsh_acp_agent``).

    Attributes:
        frames: every JSON-RPC frame read from stdout, in order.
        stray_lines: stdout lines that were not JSON-RPC frames.
    """

    def __init__(
        self, env: Mapping[str, str], cwd: Path, command: Sequence[str] | None = None
    ) -> None:
        argv = list(command) if command is not None else [sys.executable, "-m", "dsh_acp_agent"]
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
        )
        self.frames: list[JsonObject] = []
        self.stray_lines: list[str] = []
        self._incoming: queue.Queue[JsonObject | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._next_id = 0
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
        self._write({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: JsonObject) -> None:
        """Write a notification."""
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: JsonObject) -> JsonObject:
        """Send a request and return its ``result``.

        Raises:
            ResponseError: the agent answered with an error.
        """
        response = self.response(self.send(method, params))
        if "error" in response:
            raise ResponseError(method, cast(JsonObject, response["error"]))
        return cast(JsonObject, response["result"])

    def response(self, request_id: int) -> JsonObject:
        """Wait for the response frame to request ``request_id`` (frames before it are kept)."""
        for frame in self.frames:
            if frame.get("id") == request_id and "method" not in frame:
                return frame
        while True:
            try:
                frame = self._incoming.get(timeout=_WAIT_S)
            except queue.Empty:
                raise AssertionError(
                    f"no response to request {request_id} within {_WAIT_S:g}s; "
                    f"stderr:\n{self.stderr}"
                ) from None
            if frame is None:
                raise AssertionError(
                    f"the agent closed stdout before answering request {request_id}; "
                    f"stderr:\n{self.stderr}"
                )
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    def _write(self, message: JsonObject) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write((json.dumps(message) + "\n").encode("utf-8"))
        stdin.flush()

    # --- the ACP methods used by tests -----------------------------------------------------

    def initialize(self) -> JsonObject:
        return self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def new_session(self, cwd: Path) -> str:
        result = self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(result["sessionId"])

    def prompt(self, session_id: str, text: str) -> JsonObject:
        return self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

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
        """Close stdin, wait for the process to exit, return its exit code."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.closed:
            stdin.close()
        code = self.process.wait(timeout=_WAIT_S)
        for reader in self._readers:
            reader.join(timeout=_WAIT_S)
        return code

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    def __enter__(self) -> AgentProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def _read_stdout(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for raw in stdout:
            line = raw.decode("utf-8", "replace")
            try:
                frame: Any = json.loads(line)
            except ValueError:
                self.stray_lines.append(line)
                continue
            if not isinstance(frame, dict) or cast(JsonObject, frame).get("jsonrpc") != "2.0":
                self.stray_lines.append(line)
                continue
            self.frames.append(cast(JsonObject, frame))
            self._incoming.put(cast(JsonObject, frame))
        self._incoming.put(None)

    def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        for raw in stderr:
            self._stderr.append(raw)


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
        """The stored JSONL log of ``session_id``, read from disk."""
        path = self.sessions_root / f"{session_id}.jsonl"
        return read_log_text(path.read_text(encoding="utf-8"), str(path))

    def logs(self) -> list[SessionLog]:
        """Every stored JSONL log, ordered by ``(createdAt, id)``."""
        found = [self.log(path.stem) for path in self.sessions_root.glob("*.jsonl")]
        return sorted(found, key=lambda log: (log.header.created_at, log.header.id))


# --- scripted replies (one model call's chunks) ---------------------------------------------

_USAGE: Usage = {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 0, "reasoningTokens": 0}


def text_reply(text: str, *, reasoning: str | None = None) -> list[Chunk]:
    """The chunks of a reply that thinks ``reasoning`` (one delta per word) and says ``text``."""
    chunks: list[Chunk] = []
    index = 0
    if reasoning is not None:
        chunks.append({"type": "block-start", "index": index, "blockType": "reasoning"})
        for word in _words(reasoning):
            chunks.append({"type": "reasoning-delta", "index": index, "text": word})
        chunks.append(
            {"type": "block-end", "index": index, "block": {"type": "reasoning", "text": reasoning}}
        )
        index += 1
    chunks.append({"type": "block-start", "index": index, "blockType": "text"})
    for word in _words(text):
        chunks.append({"type": "text-delta", "index": index, "text": word})
    chunks.append({"type": "block-end", "index": index, "block": {"type": "text", "text": text}})
    chunks.append({"type": "usage", "usage": _USAGE})
    chunks.append({"type": "finish", "reason": {"kind": "stop"}})
    return chunks


def tool_reply(*calls: tuple[str, str, Mapping[str, Any]]) -> list[Chunk]:
    """The chunks of a reply that calls tools: each call is ``(call id, tool name, arguments)``."""
    chunks: list[Chunk] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        raw = json.dumps(arguments)
        half = len(raw) // 2
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        chunks.append(
            {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": name,
                "argumentsDelta": raw[:half],
            }
        )
        chunks.append(
            {"type": "tool-call-delta", "index": index, "id": call_id, "argumentsDelta": raw[half:]}
        )
        chunks.append(
            {
                "type": "block-end",
                "index": index,
                "block": {"type": "tool-call", "id": call_id, "name": name, "arguments": raw},
            }
        )
    chunks.append({"type": "usage", "usage": _USAGE})
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return chunks


def _words(text: str) -> list[str]:
    """``text`` cut before each space, so the pieces join back to it exactly."""
    pieces: list[str] = []
    for k, word in enumerate(text.split(" ")):
        pieces.append(word if k == 0 else " " + word)
    return [piece for piece in pieces if piece]
