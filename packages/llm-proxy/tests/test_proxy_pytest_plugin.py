"""The ``llm_proxy`` fixture in a real pytest run: record once, replay keylessly, fail a test
that does not consume its recording exactly or has none."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_core import Chunk
from dsh_scripted_server import ScriptedModelServer

CONFTEST = """
import os
import pytest

@pytest.fixture
def llm_proxy_upstream():
    return os.environ["DSH_PROXY_TEST_UPSTREAM_URL"]

@pytest.fixture
def llm_proxy_key_env():
    return "DSH_PROXY_TEST_UPSTREAM_KEY"
"""

AGENT_TEST = """
import openai

def test_hello(llm_proxy):
    with openai.OpenAI(base_url=llm_proxy, api_key="dummy", max_retries=0) as client:
        for _ in range({calls}):
            reply = client.chat.completions.create(
                model="m", messages=[{{"role": "user", "content": "hi"}}]
            )
            assert reply.choices[0].message.content == "hello"
"""


def test_record_then_replay_then_fail_on_a_partial_replay(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    upstream_key: str,
    make_text: Callable[..., list[Chunk]],
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=AGENT_TEST.format(calls=1))
    with ScriptedModelServer([[make_text(["hello"])]], api_key=upstream_key) as upstream:
        monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", upstream.base_url)
        pytester.runpytest_inprocess("--llm-proxy-mode=once", "-p", "no:cacheprovider")
        upstream.assert_consumed()
    folder = pytester.path / "llm_recordings" / "test_agent" / "test_hello"
    # Named by its place in the recording, not a fresh UUID: a re-record keeps the names.
    assert [p.name for p in folder.glob("*.jsonl")] == ["s0000.jsonl"]

    monkeypatch.delenv("DSH_PROXY_TEST_UPSTREAM_KEY")  # replay is keyless
    replayed = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1)

    pytester.makepyfile(test_agent=AGENT_TEST.format(calls=0))
    unused = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    unused.assert_outcomes(passed=1, errors=1)
    unused.stdout.fnmatch_lines(["*not consumed exactly*", "*never bound*"])


def test_replay_without_a_recording_fails_saying_how_to_make_one(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=AGENT_TEST.format(calls=1))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no recording for this test*--llm-proxy-mode=once*"])


def test_record_never_removes_a_recording_before_the_new_one_is_clean(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    upstream_key: str,
    make_text: Callable[..., list[Chunk]],
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=AGENT_TEST.format(calls=1))
    folder = pytester.path / "llm_recordings" / "test_agent" / "test_hello"
    with ScriptedModelServer([[make_text(["hello"])]], api_key=upstream_key) as upstream:
        monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", upstream.base_url)
        pytester.runpytest_inprocess("--llm-proxy-mode=record", "-p", "no:cacheprovider")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert len(list(folder.glob("*.jsonl"))) == 1

    # No key: the old recording stays, and the failure says so.
    monkeypatch.delenv("DSH_PROXY_TEST_UPSTREAM_KEY")
    keyless = pytester.runpytest_inprocess("--llm-proxy-mode=record", "-p", "no:cacheprovider")
    keyless.assert_outcomes(errors=1)
    keyless.stdout.fnmatch_lines(["*API key is not set*is kept as it was*"])
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

    # A test that fails while recording: its half-made recording is dropped, the old kept.
    monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_KEY", upstream_key)
    with ScriptedModelServer([[make_text(["goodbye"])]], api_key=upstream_key) as upstream:
        monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", upstream.base_url)
        failed = pytester.runpytest_inprocess("--llm-proxy-mode=record", "-p", "no:cacheprovider")
    failed.assert_outcomes(failed=1)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in folder.parent.iterdir()) == ["test_hello"]


def test_ini_scrubbers_apply_before_writing(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    upstream_key: str,
    make_text: Callable[..., list[Chunk]],
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nllm_proxy_scrub =\n    {{run}}=run-[0-9]+\n")
    pytester.makepyfile(
        test_agent="""
import openai, random

def test_hello(llm_proxy):
    with openai.OpenAI(base_url=llm_proxy, api_key="dummy", max_retries=0) as client:
        text = f"hi from run-{random.randint(1, 10**9)}"
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": text}]
        )
        assert reply.choices[0].message.content == "hello"
"""
    )
    with ScriptedModelServer([[make_text(["hello"])]], api_key=upstream_key) as upstream:
        monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", upstream.base_url)
        recorded = pytester.runpytest_inprocess("--llm-proxy-mode=record", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=1)
    folder = pytester.path / "llm_recordings" / "test_agent" / "test_hello"
    (log,) = folder.glob("*.jsonl")
    assert "hi from {{run}}" in log.read_text(encoding="utf-8")
    monkeypatch.delenv("DSH_PROXY_TEST_UPSTREAM_KEY")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


# The same agent test with the prompt as a parameter.
PROMPT_TEST = AGENT_TEST.replace('"content": "hi"', '"content": "{prompt}"')


def test_accept_takes_a_changed_prompt_keylessly_and_keeps_the_recorded_answer(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    upstream_key: str,
    make_text: Callable[..., list[Chunk]],
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=PROMPT_TEST.format(calls=1, prompt="hi"))
    folder = pytester.path / "llm_recordings" / "test_agent" / "test_hello"
    with ScriptedModelServer([[make_text(["hello"])]], api_key=upstream_key) as upstream:
        monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", upstream.base_url)
        pytester.runpytest_inprocess("--llm-proxy-mode=record", "-p", "no:cacheprovider")
    monkeypatch.delenv("DSH_PROXY_TEST_UPSTREAM_KEY")  # from here on, no key at all
    monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", "http://127.0.0.1:9")  # nothing answers

    pytester.makepyfile(test_agent=PROMPT_TEST.format(calls=1, prompt="hello there"))
    drifted = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    drifted.assert_outcomes(failed=1, errors=1)  # the changed prompt is refused in replay
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    # A change that needs another call cannot keep recorded answers: the old one stays.
    pytester.makepyfile(test_agent=PROMPT_TEST.format(calls=2, prompt="hello there"))
    more = pytester.runpytest_inprocess("--llm-proxy-mode=accept", "-p", "no:cacheprovider")
    more.assert_outcomes(failed=1, errors=1)
    more.stdout.fnmatch_lines(["*recorded answers do not fit the new requests*is kept as it was*"])
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

    pytester.makepyfile(test_agent=PROMPT_TEST.format(calls=1, prompt="hello there"))
    accepted = pytester.runpytest_inprocess(
        "--llm-proxy-mode=accept", "-p", "no:cacheprovider", "-s"
    )
    accepted.assert_outcomes(passed=1)
    accepted.stdout.fnmatch_lines(["*the model was NOT asked again (1 changed request(s))*"])
    text = "".join(p.read_text() for p in folder.glob("*.jsonl"))
    assert "hello there" in text  # the new prompt…
    assert '"hello"' in text  # …and the old answer
    assert sorted(before) == sorted(p.name for p in folder.iterdir())  # the same file names
    replayed = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=1)
