"""The script file format, its validation errors, and the dsh-scripted-model-server process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_core import Chunk, ModelError, ModelRequest
from dsh_llm_openai import ChatClient, ChatSettings
from dsh_scripted_server import (
    Fault,
    Pause,
    ScriptedModelServer,
    ScriptError,
    load_script_file,
    main,
)

SettingsFactory = Callable[..., ChatSettings]

TEXT: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "from file"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "from file"}},
    {
        "type": "usage",
        "usage": {"inputTokens": 3, "outputTokens": 2, "cacheReadTokens": 1, "reasoningTokens": 0},
    },
    {"type": "finish", "reason": {"kind": "stop"}},
]


def write(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "script.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def test_file_loads_chunks_and_every_fault_kind(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "sessions": [
                [
                    {
                        "fault": {
                            "kind": "status",
                            "status": 429,
                            "retryAfter": 1.5,
                            "message": "wait",
                        }
                    },
                    {"chunks": TEXT},
                ],
                [
                    {"fault": {"kind": "drop-after", "after": 2}},
                    {"fault": {"kind": "drop-after", "after": 1, "chunks": TEXT}},
                    {"fault": {"kind": "slow-first-byte", "seconds": 0.5}},
                    {"fault": {"kind": "slow-first-byte", "seconds": 0, "chunks": TEXT}},
                ],
            ]
        },
    )
    first, second = load_script_file(path)
    assert first == [Fault.status(429, retry_after=1.5, message="wait"), TEXT]
    assert second[0] == Fault.drop_after(2)
    assert second[1] == Fault.drop_after(1, TEXT)
    assert second[2] == Fault.slow_first_byte(0.5)
    assert second[3] == Fault.slow_first_byte(0, TEXT)


INVALID: list[tuple[Any, str, str]] = [
    ("{not json", "(document)", "not valid JSON"),
    ([], "(document)", "expected an object with exactly 'sessions'"),
    ({"sessions": [], "extra": 1}, "(document)", "exactly 'sessions'"),
    ({"sessions": {}}, "sessions", "expected an array of session scripts"),
    ({"sessions": [{}]}, "sessions[0]", "expected an array of responses"),
    ({"sessions": [[[]]]}, "sessions[0][0]", "expected an object with 'chunks' or 'fault'"),
    ({"sessions": [[{"chunks": [], "fault": {}}]]}, "sessions[0][0]", "exactly one of"),
    ({"sessions": [[{"chunks": {}}]]}, "sessions[0][0].chunks", "expected an array of chunks"),
    (
        {"sessions": [[{"chunks": TEXT}, {"chunks": [{"type": "text-delta", "index": 0}]}]]},
        "sessions[0][1].chunks[0].text",
        "Field required",
    ),
    (
        {"sessions": [[{"chunks": [{"type": "text-deltas", "index": 0, "text": "x"}]}]]},
        "sessions[0][0].chunks[0].type",
        "got 'text-deltas', expected one of",
    ),
    (
        {"sessions": [[{"chunks": [{"type": "text-delta", "index": "0", "text": "x"}]}]]},
        "sessions[0][0].chunks[0].index",
        "Input should be a valid integer",
    ),
    (
        {"sessions": [[{"chunks": [{"type": "text-delta", "index": -1, "text": "x"}]}]]},
        "sessions[0][0].chunks[0].index",
        "greater than or equal to 0",
    ),
    (
        {"sessions": [[{"chunks": [{"type": "text-delta", "index": 0, "text": "x", "y": 1}]}]]},
        "sessions[0][0].chunks[0].y",
        "Extra inputs are not permitted",
    ),
    (
        {
            "sessions": [
                [
                    {
                        "chunks": [
                            {
                                "type": "block-end",
                                "index": 0,
                                "block": {"type": "tool-call", "id": "c", "name": "n"},
                            }
                        ]
                    }
                ]
            ]
        },
        "sessions[0][0].chunks[0].block.arguments",
        "Field required",
    ),
    (
        {"sessions": [[{"chunks": [{"type": "usage", "usage": {"inputTokens": 1}}]}]]},
        "sessions[0][0].chunks[0].usage.outputTokens",
        "Field required",
    ),
    (
        {"sessions": [[{"chunks": [{"type": "finish", "reason": {"kind": "aborted"}}]}]]},
        "sessions[0][0].chunks[0].reason.kind",
        "Input should be",
    ),
    (
        {"sessions": [[{"fault": {"kind": "explode"}}]]},
        "sessions[0][0].fault.kind",
        "got 'explode'",
    ),
    (
        {"sessions": [[{"fault": {"kind": "status", "status": 200}}]]},
        "sessions[0][0].fault.status",
        "greater than or equal to 400",
    ),
    (
        {"sessions": [[{"fault": {"kind": "drop-after"}}]]},
        "sessions[0][0].fault.after",
        "Field required",
    ),
    (
        {"sessions": [[{"fault": {"kind": "slow-first-byte", "seconds": 1, "chunks": [1]}}]]},
        "sessions[0][0].fault.chunks[0]",
        "expected an object",
    ),
]


@pytest.mark.parametrize(("doc", "path", "reason"), INVALID)
def test_invalid_files_name_the_json_path(tmp_path: Path, doc: Any, path: str, reason: str) -> None:
    file = write(tmp_path, doc)
    with pytest.raises(ScriptError) as info:
        load_script_file(file)
    assert info.value.source == str(file)
    assert info.value.path == path
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{file}: at {path}: ")


def test_add_session_validates_python_scripts() -> None:
    with ScriptedModelServer() as server:
        bad: Any = {"type": "finish", "reason": {}}
        with pytest.raises(ScriptError) as info:
            server.add_session([TEXT, [Pause(), bad]])
        assert info.value.path == "responses[1][1].reason.kind"
        with pytest.raises(ScriptError) as not_a_list:
            server.set_session("s", "chunks")  # type: ignore[arg-type]
        assert not_a_list.value.path == "responses"
        assert server.unconsumed() == []


@pytest.mark.parametrize(
    "build",
    [lambda: Fault.status(200), lambda: Fault.drop_after(-1), lambda: Fault.slow_first_byte(-1)],
)
def test_fault_arguments_are_checked(build: Callable[[], Fault]) -> None:
    with pytest.raises(ValueError, match="Fault"):
        build()


@pytest.mark.anyio
async def test_from_file_serves_the_script(tmp_path: Path, make_settings: SettingsFactory) -> None:
    path = write(
        tmp_path, {"sessions": [[{"fault": {"kind": "status", "status": 502}}, {"chunks": TEXT}]]}
    )
    with ScriptedModelServer.from_file(path) as server:
        async with ChatClient(make_settings(server.base_url)) as client:
            request = ModelRequest(session_id="f", messages=[])
            assert [c async for c in client.stream(request)] == TEXT
        assert [r.status for r in server.requests] == [502, 200]


def test_server_answers_404_off_the_endpoint() -> None:
    with ScriptedModelServer() as server:
        response = httpx.post(server.base_url + "/v1/models", json={})
        assert response.status_code == 404
        assert server.requests[0].path == "/v1/models"


def test_request_without_session_header_is_an_error() -> None:
    with ScriptedModelServer([[TEXT]]) as server:
        response = httpx.post(server.base_url + "/chat/completions", json={"model": "m"})
        assert response.status_code == 410
        assert "X-DSH-Session-Id" in response.json()["error"]["message"]
        assert server.requests[0].session_id is None
        assert not server.requests[0].authorized
        assert server.unconsumed() == ["script #1 (1 calls) was never bound to a live session"]


# --- the console script --------------------------------------------------------------------


def _spawn(script: Path, *extra: str) -> subprocess.Popen[str]:
    code = "import sys; from dsh_scripted_server import main; sys.exit(main())"
    return subprocess.Popen(
        [sys.executable, "-c", code, "--script", str(script), "--port", "0", *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.anyio
async def test_cli_prints_base_url_serves_and_stops_at_stdin_eof(
    tmp_path: Path, make_settings: SettingsFactory
) -> None:
    with _spawn(write(tmp_path, {"sessions": [[{"chunks": TEXT}, {"chunks": TEXT}]]})) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        line = proc.stdout.readline()
        assert line.startswith("BASE_URL=http://127.0.0.1:")
        base_url = line.strip().removeprefix("BASE_URL=")
        async with ChatClient(make_settings(base_url)) as client:
            request = ModelRequest(session_id="cli", messages=[])
            assert [c async for c in client.stream(request)] == TEXT
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        assert "session cli (script #1) made 1 of 2 recorded calls" in proc.stderr.read()


def test_cli_stops_on_sigterm(tmp_path: Path) -> None:
    with _spawn(write(tmp_path, {"sessions": []}), "--ignore-stdin") as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("BASE_URL=")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_cli_rejects_an_invalid_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"sessions": [[{"fault": {"kind": "status"}}]]})
    assert main(["--script", str(path)]) == 2
    assert main(["--script", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert f"invalid script: {path}: at sessions[0][0].fault.status: Field required" in err
    assert "cannot read script" in err


def test_testing_does_not_import_pytest() -> None:
    code = (
        "import sys, dsh_scripted_server; "
        "sys.exit(1 if 'pytest' in sys.modules or '_pytest' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_model_error_from_client_is_reexported() -> None:
    # The client raises dsh_core's ModelError, not a private subclass.
    assert ModelError.__module__ == "dsh_core._model"


def test_cli_strict_mode_and_server_wide_faults(tmp_path: Path) -> None:
    script = write(tmp_path, {"sessions": [[{"fault": {"kind": "empty"}}]]})
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SCRIPTED_SERVER_KEY": "the-key"}
    code = "import sys; from dsh_scripted_server import main; sys.exit(main())"
    args = ["--strict", "--api-key-env", "SCRIPTED_SERVER_KEY", "--models", "m1,m2"]
    args += ["--models-status", "402", "--retry-after", "7", "--ignore-stdin"]
    with subprocess.Popen(
        [sys.executable, "-c", code, "--script", str(script), *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip().removeprefix("BASE_URL=")
        try:
            refused = httpx.get(base_url + "/models", headers={"Authorization": "Bearer wrong"})
            balance = httpx.get(base_url + "/models", headers={"Authorization": "Bearer the-key"})
            chat = httpx.post(
                base_url + "/chat/completions",
                json={"model": "m2", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": "Bearer the-key", "X-DSH-Session-Id": "s"},
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    assert refused.status_code == 401
    assert (balance.status_code, balance.headers["Retry-After"]) == (402, "7")
    assert balance.json()["error"]["message"] == "Insufficient Balance"
    assert chat.status_code == 200
    assert '"finish_reason": "stop"' in chat.text  # the empty completion


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--chat-status", "200"], "needs a 4xx or 5xx status"),
        (["--api-key-env", "SCRIPTED_SERVER_KEY_UNSET"], "$SCRIPTED_SERVER_KEY_UNSET is empty"),
    ],
)
def test_cli_rejects_bad_options(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write(tmp_path, {"sessions": []})
    assert main(["--script", str(script), *argv]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fault", "where"),
    [
        ({"kind": "raw", "parts": ["data: x\n\n", -1]}, "pauses must be seconds >= 0"),
        ({"kind": "status", "status": 500, "message": "a", "body": "b"}, "a message or a body"),
        ({"kind": "empty", "extra": 1}, "sessions[0][0].fault.extra"),
    ],
)
def test_new_fault_kinds_are_validated(
    fault: dict[str, object], where: str, tmp_path: Path
) -> None:
    with pytest.raises(ScriptError) as info:
        load_script_file(write(tmp_path, {"sessions": [[{"fault": fault}]]}))
    assert where in str(info.value)


def test_server_faults_must_be_status_faults() -> None:
    with pytest.raises(ValueError, match=r"chat_fault must be a Fault\.status"):
        ScriptedModelServer(chat_fault=Fault.empty())
