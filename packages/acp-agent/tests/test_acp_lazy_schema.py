"""A run whose requests are plain never imports the ``acp`` schema, and answers as ``acp`` would.

The agent routes plain requests itself (``dsh_acp_agent._requests``) and everything else
through ``acp``'s router, imported on first use. These tests pin both halves: what a start and
a plain conversation import (read from ``sys.modules`` and Python's import profile, never
timed), and that every answer frame is byte for byte what ``acp``'s own connection writes.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from acp.connection import Connection
from acp.exceptions import RequestError
from acp.schema import (
    CancelNotification,
    InitializeRequest,
    LoadSessionRequest,
    NewSessionRequest,
    PromptRequest,
)
from pydantic import BaseModel

from dsh_acp_agent import AcpServer, AgentSettings, ProtocolError, build_agent, build_router
from dsh_acp_agent._requests import plain_params
from dsh_acp_agent._server import connect
from dsh_acp_agent._transport import dumps_frame
from dsh_acp_agent.testing import AgentRun, text_reply
from dsh_scripted_server import ScriptedModelServer

# Modules a replayed run on the JSONL store must not pay for at start.
_HEAVY = ("acp", "httpx", "rich", "sqlite3", "dsh_persistence_sqlite", "dsh_llm_deepseek")


def test_starting_a_replayed_agent_imports_no_acp_httpx_rich_or_sqlite() -> None:
    probe = (
        "import sys, dsh_acp_agent._main, dsh_llm_replay, dsh_persistence_jsonl\n"
        f"print(sorted(m for m in {_HEAVY!r} if m in sys.modules))\n"
        "print('pydantic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]", "True"]  # the second line shows the probe sees what was imported


def _imported(stderr: str) -> set[str]:
    """Module names in ``PYTHONPROFILEIMPORTTIME`` output (``import time: a | b | name``)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_a_plain_conversation_never_imports_the_acp_package(
    agent_run: AgentRun, model_server: ScriptedModelServer
) -> None:
    model_server.add_session([text_reply("PONG")])
    with agent_run.start(PYTHONPROFILEIMPORTTIME="1") as agent:
        agent.initialize({"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True})
        session_id = agent.new_session(agent_run.workspace)
        assert agent.prompt(session_id, "Reply PONG") == {"stopReason": "end_turn"}
        agent.load_session(session_id, agent_run.workspace)
        agent.notify("session/cancel", {"sessionId": session_id})
        agent_run.finish(agent)
    imported = _imported(agent.stderr)
    assert {"dsh_acp_agent._main", "httpx"} <= imported  # the profile is read
    assert not {name for name in imported if name == "acp" or name.startswith("acp.")}


def test_a_request_outside_the_plain_subset_loads_acp_and_is_answered(
    agent_run: AgentRun,
) -> None:
    with agent_run.start(PYTHONPROFILEIMPORTTIME="1") as agent:
        result = agent.request("initialize", {"protocolVersion": "2024-11-05"})
        agent_run.finish(agent)
    assert result["protocolVersion"] == 1
    assert "acp.schema" in _imported(agent.stderr)


# --- the plain subset agrees with acp's models ---------------------------------------------

_PLAIN: list[tuple[str, bool, dict[str, Any], type[BaseModel]]] = [
    ("initialize", False, {"protocolVersion": 1}, InitializeRequest),
    (
        "initialize",
        False,
        {
            "protocolVersion": 0,
            "clientCapabilities": {"fs": {"readTextFile": True}, "_meta": {"x": 1}},
            "clientInfo": {"name": "zed", "version": "1"},
        },
        InitializeRequest,
    ),
    ("session/new", False, {"cwd": "/w", "mcpServers": []}, NewSessionRequest),
    (
        "session/new",
        False,
        {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/a", "/b"]},
        NewSessionRequest,
    ),
    (
        "session/load",
        False,
        {"sessionId": "s", "cwd": "/w", "mcpServers": [], "additionalDirectories": None},
        LoadSessionRequest,
    ),
    (
        "session/prompt",
        False,
        {"sessionId": "s", "prompt": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]},
        PromptRequest,
    ),
    ("session/cancel", True, {"sessionId": "s"}, CancelNotification),
]


@pytest.mark.parametrize(("method", "notification", "params", "model"), _PLAIN)
def test_plain_params_get_the_keywords_acps_router_would_pass(
    method: str, notification: bool, params: dict[str, Any], model: type[BaseModel]
) -> None:
    plain = plain_params(method, params, notification)
    assert plain is not None
    _, kwargs = plain
    validated = model.model_validate(params)
    for name, value in kwargs.items():
        expected = getattr(validated, name)
        if name == "prompt":
            expected = [block.model_dump(exclude_none=True) for block in expected]
        assert value == expected, name


@pytest.mark.parametrize(
    ("method", "notification", "params"),
    [
        ("initialize", False, {"protocolVersion": True}),
        ("initialize", False, {"protocolVersion": "1"}),
        ("initialize", False, {"protocolVersion": 65536}),
        ("initialize", False, {"protocolVersion": 1, "_meta": {}}),
        ("initialize", False, {"protocol_version": 1}),
        ("initialize", False, {"protocolVersion": 1, "clientCapabilities": None}),
        ("initialize", True, {"protocolVersion": 1}),
        ("session/new", False, {"cwd": "/w", "mcpServers": [{"name": "m"}]}),
        ("session/new", False, {"cwd": "/w"}),
        ("session/new", False, {"cwd": "/w", "mcpServers": [], "additionalDirectories": [1]}),
        ("session/load", False, {"sessionId": 5, "cwd": "/w", "mcpServers": []}),
        ("session/prompt", False, {"sessionId": "s", "prompt": [{"type": "image"}]}),
        ("session/prompt", False, {"sessionId": "s", "prompt": [{"type": "text"}]}),
        ("session/prompt", False, {"sessionId": "s", "prompt": "hi"}),
        ("session/cancel", False, {"sessionId": "s"}),
        ("session/cancel", True, None),
        (["session/new"], False, {}),
    ],
)
def test_anything_else_is_left_to_acp(method: Any, notification: bool, params: Any) -> None:
    assert plain_params(method, params, notification) is None


# --- answers, byte for byte, against acp's own connection ----------------------------------


class _ListTransport:
    """Messages in from a list; frames out into a list. Input ends once every request that
    expects an answer has one (as ``FrameTransport`` holds end-of-input back)."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self._incoming = list(messages)
        self._expected = sum(1 for m in messages if "id" in m and m.get("method") is not None)
        self.sent: list[dict[str, Any]] = []
        self._answered = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        answers = [m for m in self.sent if "method" not in m]
        if len(answers) >= self._expected:
            self._answered.set()

    async def receive(self) -> dict[str, Any] | None:
        if self._incoming:
            return self._incoming.pop(0)
        if self._expected:
            await self._answered.wait()
        return None

    async def close(self) -> None:
        return None


class _RequestErrorOmittingNoData(RequestError):
    """The agent's ``ProtocolError`` as it was, a subclass of ``acp``'s ``RequestError``."""

    def to_error_obj(self) -> dict[str, Any]:
        return ProtocolError(self.code, str(self), self.data).to_error_obj()


def _acp_connection(server: AcpServer, transport: _ListTransport) -> Any:
    """How the agent was wired before: ``acp``'s connection over ``acp``'s router."""
    router = build_router(server)

    async def handle(method: Any, params: Any, is_notification: bool) -> Any:
        try:
            return await router(method, params, is_notification)
        except ProtocolError as exc:
            raise _RequestErrorOmittingNoData(exc.code, str(exc), exc.data) from exc

    conn = Connection(handle, transport, listening=False)
    server.bind(conn)
    return conn


def _ours(server: AcpServer, transport: _ListTransport) -> Any:
    return connect(server, transport)


def _hostile(cwd: str) -> list[dict[str, Any]]:
    """Requests and notifications of every shape: plain, salvaged, invalid, unknown."""
    calls: list[tuple[Any, Any]] = [
        ("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
        ("initialize", {"protocolVersion": "2024-11-05"}),
        ("initialize", {"protocolVersion": 70000}),
        ("initialize", None),
        ("initialize", []),
        ("initialize", {"protocolVersion": 1, "clientCapabilities": "x", "_meta": {"k": 1}}),
        ("session/new", {"cwd": "relative", "mcpServers": []}),
        ("session/new", {"cwd": cwd}),
        ("session/new", {"cwd": cwd, "mcpServers": [], "additionalDirectories": ["/x"]}),
        ("session/new", {"cwd": cwd, "mcpServers": [], "additionalDirectories": [1]}),
        ("session/new", {"cwd": cwd, "mcp_servers": []}),
        ("session/load", {"sessionId": "nope", "cwd": cwd, "mcpServers": []}),
        ("session/load", {"session_id": "nope", "cwd": cwd, "mcp_servers": []}),
        ("session/load", {"sessionId": 5, "cwd": cwd, "mcpServers": []}),
        ("session/load", {"sessionId": "../x", "cwd": cwd, "mcpServers": []}),
        ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "hi"}]}),
        (
            "session/prompt",
            {
                "sessionId": "nope",
                "prompt": [{"type": "image", "data": "", "mimeType": "image/png"}],
            },
        ),
        ("session/prompt", {"sessionId": "nope", "prompt": [{"type": "text"}]}),
        ("session/prompt", {"sessionId": "nope", "prompt": "hi"}),
        ("session/cancel", {"sessionId": "nope"}),
        ("foo/bar", {}),
        ("_ext/thing", {}),
        (5, {}),
        (["x"], {}),
    ]
    messages: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
        for i, (method, params) in enumerate(calls)
    ]
    messages[3].pop("params")
    messages += [
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 1}},
        {"jsonrpc": "2.0", "method": "session/cancel"},
        {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "method": "unknown/notification", "params": {}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "id": 100, "method": None},
    ]
    return messages


async def _answers(
    wire: Callable[[AcpServer, _ListTransport], Any], root: Path, messages: list[dict[str, Any]]
) -> list[bytes]:
    server = AcpServer(build_agent(AgentSettings(sessions_root=root)).agent)
    transport = _ListTransport(messages)
    conn = wire(server, transport)
    await conn.main_loop()
    await conn.close()
    server.close()
    ids: dict[str, str] = {}
    frames: list[bytes] = []
    for frame in transport.sent:  # in the order written
        result: Any = frame.get("result")
        if isinstance(result, dict) and "sessionId" in result:  # a new session's random id
            session_id = str(cast(dict[str, Any], result)["sessionId"])
            frame["result"] = {"sessionId": ids.setdefault(session_id, f"s{len(ids)}")}
        frames.append(dumps_frame(frame))
    return frames


def test_every_answer_is_the_frame_acps_connection_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No prompt reaches the model (each is refused first): the generic provider does.
    monkeypatch.setenv("DSH_MODEL_CLIENT", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    workspace = tmp_path / "w"
    workspace.mkdir()
    messages = _hostile(str(workspace))
    expected = asyncio.run(_answers(_acp_connection, tmp_path / "sessions", messages))
    ours = asyncio.run(_answers(_ours, tmp_path / "sessions", messages))
    assert len(ours) == 24  # one answer per request with a method, none for the rest
    assert ours == expected
    assert b'"code":-32602,"message":"Invalid params","data":{"errors":' in b"".join(ours)
