"""Input a careless or hostile client sends: over-long lines, bad cwds, unknown notifications."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_acp_agent._transport import FrameTransport
from dsh_acp_agent.testing import AgentRun

_LIMIT = 128


def _frame(request_id: int | None, method: str, params: dict[str, Any]) -> str:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        frame["id"] = request_id
    return json.dumps(frame, separators=(",", ":"))


async def _receive_all(pieces: list[bytes]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Feed ``pieces`` one by one; return (messages received, frames the transport wrote)."""
    reader = asyncio.StreamReader(limit=_LIMIT)
    read_fd, write_fd = os.pipe()
    transport = FrameTransport(reader, write_fd, line_limit=_LIMIT)
    received: list[dict[str, Any]] = []

    async def consume() -> None:
        while (message := await transport.receive()) is not None:
            received.append(message)

    consumer = asyncio.create_task(consume())
    for piece in pieces:
        reader.feed_data(piece)
        await asyncio.sleep(0)
    reader.feed_eof()
    await consumer
    await transport.close()
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as out:
        written = [json.loads(line) for line in out.read().splitlines()]
    return received, written


# The tail of the cut line is itself a well-formed request: it must never run.
_TAIL = _frame(7, "session/new", {"cwd": "/", "mcpServers": []})
_NEXT = _frame(None, "session/cancel", {"sessionId": "s"})


@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param([b"x" * 300 + f"{_TAIL}\n{_NEXT}\n".encode()], id="one-piece"),
        pytest.param(
            [b"x" * 100, b"y" * 100, b"z" * 100, f"{_TAIL}\n".encode(), f"{_NEXT}\n".encode()],
            id="arriving-in-pieces",
        ),
        pytest.param([b"x" * 300 + _TAIL.encode()], id="cut-off-by-eof"),
    ],
)
def test_an_over_long_line_is_one_error_and_its_tail_never_runs(pieces: list[bytes]) -> None:
    received, written = asyncio.run(_receive_all(pieces))
    expected_next = [json.loads(_NEXT)] if _NEXT.encode() in b"".join(pieces) else []
    assert received == expected_next
    assert written == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": f"Invalid request: line longer than {_LIMIT} bytes, dropped up to "
                "the next newline",
            },
        }
    ]


def test_lines_within_the_limit_pass_untouched() -> None:
    short = _frame(None, "x", {})
    received, written = asyncio.run(_receive_all([f"{short}\n{short}".encode()]))
    assert received == [json.loads(short)] * 2
    assert written == []


@pytest.mark.e2e
def test_bad_cwds_extra_dirs_and_ids_are_refused_and_unknown_notifications_are_quiet(
    agent_run: AgentRun, tmp_path: Path
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    bad_cwds = ["relative/dir", str(tmp_path / "missing"), str(a_file), ""]
    lines = [_frame(1, "initialize", {"protocolVersion": 1})]
    lines += [
        _frame(10 + n, "session/new", {"cwd": cwd, "mcpServers": []})
        for n, cwd in enumerate(bad_cwds)
    ]
    extra = {"cwd": str(agent_run.workspace), "mcpServers": [], "additionalDirectories": ["/x"]}
    lines.append(_frame(20, "session/new", extra))
    lines += [
        _frame(None, "vendor/unknown", {"a": 1}),
        _frame(None, "session/cancel", {}),  # known method, bad params
        _frame(None, "$/cancel_request", {"id": 3}),
        _frame(30, "session/new", {"cwd": str(agent_run.workspace), "mcpServers": []}),
        _frame(
            40,
            "session/load",
            {"sessionId": "../escape", "cwd": str(agent_run.workspace), "mcpServers": []},
        ),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "dsh_acp_agent"],
        input="\n".join(lines).encode() + b"\n",
        capture_output=True,
        env=agent_run.env,
        cwd=agent_run.workspace,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""
    by_id = {frame["id"]: frame for frame in map(json.loads, done.stdout.splitlines())}
    for n, cwd in enumerate(bad_cwds):
        relative = not cwd.startswith("/")
        assert by_id[10 + n]["error"] == {
            "code": -32602,
            # upstream's text for a relative cwd; ours for one that is not a directory
            "message": f"Invalid params: cwd must be an absolute path: {cwd}"
            if relative
            else "Invalid params: cwd must be an absolute path to an existing directory, "
            f"got {cwd!r}",
        }
    assert by_id[20]["error"] == {
        "code": -32602,
        "message": "Invalid params: additionalDirectories is not supported",
    }
    assert "sessionId" in by_id[30]["result"]
    refused = by_id[40]["error"]
    assert (refused["code"], refused["data"]) == (-32602, {"sessionId": "../escape"})
    assert refused["message"].startswith(f"Invalid params: {agent_run.sessions_root}: field 'id'")
    # Only the one accepted session was created.
    assert len(agent_run.logs()) == 1


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("profile", "suffix"), [("june", " in this MVP"), ("current", "")], ids=["june", "current"]
)
def test_session_new_validates_in_upstreams_order_with_its_texts_before_creating(
    agent_run: AgentRun, profile: str, suffix: str
) -> None:
    """June's ``validateWorkspaceParams`` + ``validateMcpServers`` and head's
    ``validateSessionParams``: cwd, then additionalDirectories, then mcpServers, all before
    the session is created."""
    cwd = str(agent_run.workspace)
    server: dict[str, Any] = {"name": "x", "command": "/bin/true", "args": [], "env": []}
    requests: dict[int, dict[str, Any]] = {
        10: {"cwd": "rel", "mcpServers": [server], "additionalDirectories": ["/x"]},
        11: {"cwd": cwd, "mcpServers": [server], "additionalDirectories": ["/x"]},
        12: {"cwd": cwd, "mcpServers": [server]},
    }
    lines = [_frame(1, "initialize", {"protocolVersion": 1})]
    lines += [_frame(n, "session/new", params) for n, params in requests.items()]
    done = subprocess.run(
        [sys.executable, "-m", "dsh_acp_agent"],
        input="\n".join(lines).encode() + b"\n",
        capture_output=True,
        env={**agent_run.env, "DSH_LOOP_PROFILE": profile},
        cwd=agent_run.workspace,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    by_id = {frame["id"]: frame for frame in map(json.loads, done.stdout.splitlines())}
    assert [by_id[n]["error"]["message"] for n in requests] == [
        "Invalid params: cwd must be an absolute path: rel",
        f"Invalid params: additionalDirectories is not supported{suffix}",
        f"Invalid params: mcpServers is not supported{suffix}",
    ]
    assert {by_id[n]["error"]["code"] for n in requests} == {-32602}
    assert agent_run.logs() == []  # refused before anything was created
