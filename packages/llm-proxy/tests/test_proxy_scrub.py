"""Scrubbing: a run's own paths and user patterns become placeholders on both sides of replay,
and a replayed answer gets the live paths back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from dsh_core import Chunk
from dsh_llm_proxy import ProxyServer, Scrub, main
from dsh_llm_proxy._scrub import parse_assignment
from dsh_scripted_server import ScriptedModelServer

KEY_ENV = "DSH_PROXY_TEST_UPSTREAM_KEY"


def _client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="dummy-client-key", max_retries=0)


def _ask(base_url: str, cwd: str, day: str) -> tuple[str | None, str]:
    """One call whose system prompt names a path and a date; the answer and its tool args."""
    messages: list[Any] = [
        {"role": "system", "content": f"You work in {cwd}. Today is {day}."},
        {"role": "user", "content": f"List {cwd}/src please"},
    ]
    with _client(base_url) as client:
        first = client.chat.completions.create(model="m", messages=messages)
        message = first.choices[0].message
        call = (message.tool_calls or [])[0]
        assert call.type == "function"
        messages.append(message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"{cwd}/src/a.py"})
        second = client.chat.completions.create(model="m", messages=messages)
    return second.choices[0].message.content, call.function.arguments


def test_paths_and_dates_replay_from_another_cwd_and_day(
    tmp_path: Path,
    upstream_key: str,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    recorded_cwd, live_cwd = '/tmp/run-1/c"wd', "/tmp/run-2/cwd"
    # One delta per tool call: each chunk is scrubbed on its own (see _scrub).
    calls = make_tool_calls(("call_1", "ls", {"path": f"{recorded_cwd}/src"}))
    whole = json.dumps({"path": f"{recorded_cwd}/src"})
    calls[1]["argumentsDelta"], calls[2]["argumentsDelta"] = whole, ""  # pyright: ignore[reportGeneralTypeIssues]
    script = [calls, make_text([f"Found {recorded_cwd}/src/a.py"])]
    dates = ("placeholder", r"\d{4}-\d\d-\d\d")
    root = tmp_path / "recording"
    scrub = Scrub.build([("{{cwd}}", recorded_cwd)], [("{{date}}", dates[1])])
    with (
        ScriptedModelServer([script], api_key=upstream_key) as upstream,
        ProxyServer.record(
            root, upstream=upstream.base_url, api_key_env=KEY_ENV, scrub=scrub
        ) as proxy,
    ):
        _ask(proxy.base_url, recorded_cwd, "2026-01-15")
    written = "".join(p.read_text(encoding="utf-8") for p in root.glob("*.jsonl"))
    assert recorded_cwd not in written
    assert "2026-01-15" not in written
    assert "{{cwd}}/src" in written
    assert "{{date}}" in written

    # Another cwd, another day: green, and the answers name the live cwd.
    live = Scrub.build([("{{cwd}}", live_cwd)], [("{{date}}", dates[1])])
    with ProxyServer.replay(root, scrub=live) as proxy:
        answer, arguments = _ask(proxy.base_url, live_cwd, "2026-01-16")
        report = proxy.report()
    assert report.problems == []
    assert answer == f"Found {live_cwd}/src/a.py"
    assert json.loads(arguments) == {"path": f"{live_cwd}/src"}

    # Without the scrub the live request is compared as it is: red.
    drift = pytest.raises(openai.UnprocessableEntityError, match="request drift: system")
    with ProxyServer.replay(root) as proxy, drift:
        _ask(proxy.base_url, live_cwd, "2026-01-16")


def test_the_cli_takes_literals_and_scrubbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", "--root", str(tmp_path / "none"), "--literal", "{{cwd}}=/x"]) == 2
    assert "recording root" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", "--root", str(tmp_path), "--scrub", "date=x"])
    assert "expected {{name}}=VALUE" in capsys.readouterr().err
    assert main(["replay", "--root", str(tmp_path), "--scrub", "{{x}}=("]) == 2
    assert "not a regular expression" in capsys.readouterr().err


@pytest.mark.parametrize("text", ["{{x}}", "x=1", "{{x}}=", "{{1x}}=a", "{x}=a"])
def test_bad_assignments_say_the_form(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected \{\{name\}\}=VALUE"):
        parse_assignment(text, "--scrub")


def test_scrub_orders_and_escapes() -> None:
    scrub = Scrub.build(
        [("{{tmp}}", "/t"), ("{{cwd}}", "/t/run/cwd")], [("{{n}}", r"\d+"), ("{{b}}", "\\\\")]
    )
    # Longest literal first, then the patterns in order; a placeholder is inserted as it is.
    assert scrub.text("/t/run/cwd and /t/x 42 \\") == "{{cwd}} and {{tmp}}/x {{n}} {{b}}"
    chunk: Any = {"type": "tool-call-delta", "index": 0, "argumentsDelta": '{"p": "{{cwd}}"}'}
    quoted = Scrub.build([("{{cwd}}", 'C:\\a"b')])
    restored: Any = quoted.restore(chunk)
    assert json.loads(restored["argumentsDelta"]) == {"p": 'C:\\a"b'}
    text: Any = {"type": "text-delta", "index": 0, "text": "in {{cwd}}"}
    restored_text: Any = quoted.restore(text)
    assert restored_text["text"] == 'in C:\\a"b'
    with pytest.raises(ValueError, match="empty string"):
        Scrub.build(patterns=[("{{x}}", "a*")])
    assert not Scrub.build()


@pytest.mark.parametrize(
    "pattern",
    [r"(a)\1", r"a(?=b)", r"(?<!x)a"],  # back-reference, look-ahead, look-behind
)
def test_a_scrubber_only_a_backtracking_engine_runs_is_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match=r"linear-time engine \(RE2\)"):
        Scrub.build(patterns=[("{{x}}", pattern)])


def test_a_nested_quantifier_scrubs_in_linear_time() -> None:
    # (a+)+$ against a run of a's that does not end the text backtracks exponentially in
    # Python's re (2**40 paths here: the test would not end); RE2 answers at once.
    scrub = Scrub.build(patterns=[("{{tail}}", r"(a+)+$"), ("{{day}}", r"\d{4}-\d\d-\d\d")])
    text = "a" * 40 + "b on 2026-12-01"
    assert scrub.text(text) == "a" * 40 + "b on {{day}}"
    assert scrub.text("baaa") == "b{{tail}}"
