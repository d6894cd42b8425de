"""``ScriptLibrary``: one server for many scenario folders, each request routed by content."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from dsh_scripted_server import Fault, ScriptedModelServer, ScriptError, ScriptLibrary


def _text(text: str) -> dict[str, Any]:
    return {
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": text},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]
    }


def _delegate(tool: str, prompt: str) -> dict[str, Any]:
    args = json.dumps({"description": "d", "prompt": prompt})
    block = {"type": "tool-call", "id": "call_1", "name": tool, "arguments": args}
    return {
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "tool-call"},
            {"type": "tool-call-delta", "index": 0, "id": "call_1", "name": tool,
             "argumentsDelta": args},
            {"type": "block-end", "index": 0, "block": block},
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ]
    }  # fmt: skip


def _scenario(root: Path, name: str, prompts: list[str], sessions: list[list[Any]]) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    steps = [{"op": "initialize"}, {"op": "newSession"}]
    steps += [{"op": "prompt", "text": p} for p in prompts]
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    (folder / "model.script.json").write_text(json.dumps({"sessions": sessions}))


@pytest.fixture
def library(tmp_path: Path) -> ScriptLibrary:
    # "fork" and "mixed" open with the same prompt and the same first answer, as the committed
    # fork scenarios do; they part at the second prompt.
    _scenario(
        tmp_path,
        "fork",
        ["Remember X.", "Fork and ask."],
        [[_text("OK"), _delegate("subagent_fork", "What was X?"), _text("DONE")], [_text("X")]],
    )
    _scenario(
        tmp_path,
        "mixed",
        ["Remember X.", "Spawn and ask."],
        [[_text("OK"), _delegate("subagent", "Say FRESH."), _text("BOTH")], [_text("FRESH")]],
    )
    _scenario(tmp_path, "other", ["Say A."], [[_text("A")], [_text("never reached")]])
    return ScriptLibrary.from_folder(tmp_path)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str = "", **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **extra}


def _answer(library: ScriptLibrary, *messages: dict[str, Any]) -> str:
    system = {"role": "system", "content": "You are an agent."}
    response, error = library.route({"messages": [system, *messages]})
    assert error is None
    assert isinstance(response, list)
    texts = [c["text"] for c in response if isinstance(c, dict) and c["type"] == "text-delta"]
    names = [
        c.get("name") for c in response if isinstance(c, dict) and c["type"] == "tool-call-delta"
    ]
    return "".join(texts) or f"<{names[0]}>"


def test_each_request_is_answered_from_its_own_scenario_and_session(
    library: ScriptLibrary,
) -> None:
    assert library.scenarios == ["fork", "mixed", "other"]
    # Both scenarios open alike and agree on the first answer: no ambiguity to resolve.
    assert _answer(library, _user("Remember X.")) == "OK"
    turn1 = (_user("Remember X."), _assistant("OK"))
    assert _answer(library, *turn1, _user("Fork and ask.")) == "<subagent_fork>"
    call = _assistant(tool_calls=[{"id": "call_1"}])
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "X"}
    assert _answer(library, *turn1, _user("Fork and ask."), call, tool) == "DONE"
    assert _answer(library, *turn1, _user("Spawn and ask.")) == "<subagent>"
    # A fork child carries the parent's completed turns as its seed, then its own prompt.
    assert _answer(library, *turn1, _user("What was X?")) == "X"
    # A spawned child starts fresh; list-shaped content is read like a string.
    assert _answer(library, {"role": "user", "content": [{"type": "text", "text": "Say FRESH."}]})
    assert _answer(library, _user("Say A.")) == "A"


def test_unroutable_requests_are_answered_with_a_reason(library: ScriptLibrary) -> None:
    assert library.route({"messages": [_user("Who are you?")]}) == (
        None,
        "no scenario in the library opens with the prompt 'Who are you?'",
    )
    assert library.route({"messages": [_assistant("hi")]}) == (
        None,
        "the request has no user message",
    )
    assert library.route(None) == (None, "the request has no messages array")
    _, exhausted = library.route({"messages": [_user("Say A."), _assistant("A")]})
    assert exhausted == "other[session 0]: script exhausted at call 2"


def test_scenarios_that_answer_the_same_request_differently_are_ambiguous(tmp_path: Path) -> None:
    _scenario(tmp_path, "one", ["Hi."], [[_text("ONE")]])
    _scenario(tmp_path, "two", ["Hi."], [[_text("TWO")]])
    _, error = ScriptLibrary.from_folder(tmp_path).route({"messages": [_user("Hi.")]})
    assert error == "ambiguous request: one[session 0], two[session 0] answer call 1 differently"


def test_serve_first_takes_the_place_of_the_next_routed_answers(library: ScriptLibrary) -> None:
    library.serve_first([Fault.status(503), _text("WRONG")["chunks"]])
    first, _ = library.route({"messages": [_user("Say A.")]})
    assert isinstance(first, Fault)
    assert first.status_code == 503
    assert _answer(library, _user("Say A.")) == "WRONG"
    assert _answer(library, _user("Say A.")) == "A"
    with pytest.raises(ScriptError, match=r"serve_first\[0\]\[0\]"):
        library.serve_first([[cast(Any, {"type": "nonsense"})]])


def test_a_bad_script_in_the_folder_is_an_error_naming_the_file(tmp_path: Path) -> None:
    _scenario(tmp_path, "bad", ["Hi."], [[{"chunks": [{"type": "text-delta"}]}]])
    with pytest.raises(ScriptError, match=r"bad/model.script.json: at sessions\[0\]\[0\]"):
        ScriptLibrary.from_folder(tmp_path)
    (tmp_path / "bad" / "model.script.json").write_text(json.dumps({"sessions": [[]]}))
    (tmp_path / "bad" / "input.json").write_text("{")
    with pytest.raises(ScriptError, match=r"input.json: at \(document\): not valid JSON"):
        ScriptLibrary.from_folder(tmp_path)


def test_the_server_routes_through_the_library_over_http(library: ScriptLibrary) -> None:
    with ScriptedModelServer(router=library.route) as server:
        body = {"model": "m", "stream": True, "messages": [_user("Say A.")]}
        ok = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)
        assert ok.status_code == 200
        assert '"content": "A"' in ok.text
        body["messages"] = [_user("Unknown.")]
        bad = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)
        assert bad.status_code == 410
        assert "no scenario in the library opens with" in bad.json()["error"]["message"]


def test_the_command_line_serves_a_library(library: ScriptLibrary, tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("dsh-scripted-model-server")
    with subprocess.Popen(
        [str(exe), "--library", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        line = proc.stdout.readline()
        assert line.startswith("BASE_URL=http://127.0.0.1:")
        body = {"model": "m", "stream": True, "messages": [_user("Say A.")]}
        url = line.strip().split("=", 1)[1]
        assert httpx.post(f"{url}/chat/completions", json=body, timeout=10).status_code == 200
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
