"""The ``llm_proxy`` fixture in a real pytest run: record once, replay keylessly, fail a test
that does not consume its recording exactly or has none."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


@dataclass
class AgentSuite:
    """A user's test suite in a pytester folder: the conftest pointing the ``llm_proxy``
    fixture at the test upstream, one test module, and the folder its recording goes to."""

    pytester: pytest.Pytester
    monkeypatch: pytest.MonkeyPatch
    upstream_key: str

    @property
    def recording(self) -> Path:
        """``llm_recordings/test_agent/test_hello``: the recording of ``test_hello``."""
        return self.pytester.path / "llm_recordings" / "test_agent" / "test_hello"

    def files(self) -> dict[str, bytes]:
        """The recording folder's files and their bytes (to prove it unchanged)."""
        return {p.name: p.read_bytes() for p in self.recording.iterdir()}

    def write(self, source: str) -> None:
        """Make ``source`` the suite's ``test_agent.py``."""
        self.pytester.makepyfile(test_agent=source)

    def run(self, *args: str) -> pytest.RunResult:
        """Run the suite in process (no cache folder), with ``args``."""
        return self.pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider")

    @contextmanager
    def upstream(self, *answers: list[Chunk]) -> Generator[ScriptedModelServer]:
        """A scripted upstream answering one session with ``answers``, named to the suite."""
        with ScriptedModelServer([list(answers)], api_key=self.upstream_key) as server:
            self.monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", server.base_url)
            yield server

    def keyless(self, upstream: str | None = None) -> None:
        """From here on no upstream key (and, if given, this upstream URL)."""
        self.monkeypatch.delenv("DSH_PROXY_TEST_UPSTREAM_KEY")
        if upstream is not None:
            self.monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_URL", upstream)


@pytest.fixture
def suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, upstream_key: str
) -> AgentSuite:
    """A user's suite with the conftest and ``AGENT_TEST`` (one call) written."""
    pytester.makeconftest(CONFTEST)
    made = AgentSuite(pytester, monkeypatch, upstream_key)
    made.write(AGENT_TEST.format(calls=1))
    return made


def _names(paths: Sequence[Path]) -> list[str]:
    return sorted(p.name for p in paths)


def test_record_then_replay_then_fail_on_a_partial_replay(
    suite: AgentSuite, make_text: Callable[..., list[Chunk]]
) -> None:
    with suite.upstream(make_text(["hello"])) as upstream:
        suite.run("--llm-proxy-mode=once")
        upstream.assert_consumed()
    # Named by its place in the recording, not a fresh UUID: a re-record keeps the names.
    assert _names(list(suite.recording.glob("*.jsonl"))) == ["s0000.jsonl"]

    suite.keyless()  # replay is keyless
    suite.run().assert_outcomes(passed=1)

    suite.write(AGENT_TEST.format(calls=0))
    unused = suite.run()
    unused.assert_outcomes(passed=1, errors=1)
    unused.stdout.fnmatch_lines(["*not consumed exactly*", "*never bound*"])


def test_replay_without_a_recording_fails_saying_how_to_make_one(suite: AgentSuite) -> None:
    result = suite.run()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no recording for this test*--llm-proxy-mode=once*"])


def test_record_never_removes_a_recording_before_the_new_one_is_clean(
    suite: AgentSuite, make_text: Callable[..., list[Chunk]]
) -> None:
    with suite.upstream(make_text(["hello"])):
        suite.run("--llm-proxy-mode=record")
    before = suite.files()
    assert len(list(suite.recording.glob("*.jsonl"))) == 1

    # No key: the old recording stays, and the failure says so.
    key = suite.upstream_key
    suite.keyless()
    keyless = suite.run("--llm-proxy-mode=record")
    keyless.assert_outcomes(errors=1)
    keyless.stdout.fnmatch_lines(["*API key is not set*is kept as it was*"])
    assert suite.files() == before

    # A test that fails while recording: its half-made recording is dropped, the old kept.
    suite.monkeypatch.setenv("DSH_PROXY_TEST_UPSTREAM_KEY", key)
    with suite.upstream(make_text(["goodbye"])):
        failed = suite.run("--llm-proxy-mode=record")
    failed.assert_outcomes(failed=1)
    assert suite.files() == before
    assert _names(list(suite.recording.parent.iterdir())) == ["test_hello"]


def test_ini_scrubbers_apply_before_writing(
    suite: AgentSuite, make_text: Callable[..., list[Chunk]]
) -> None:
    suite.pytester.makeini("[pytest]\nllm_proxy_scrub =\n    {{run}}=run-[0-9]+\n")
    suite.write(
        """
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
    with suite.upstream(make_text(["hello"])):
        recorded = suite.run("--llm-proxy-mode=record")
    recorded.assert_outcomes(passed=1)
    (log,) = suite.recording.glob("*.jsonl")
    assert "hi from {{run}}" in log.read_text(encoding="utf-8")
    suite.keyless()
    suite.run().assert_outcomes(passed=1)


# The same agent test with the prompt as a parameter.
PROMPT_TEST = AGENT_TEST.replace('"content": "hi"', '"content": "{prompt}"')


def test_accept_takes_a_changed_prompt_keylessly_and_keeps_the_recorded_answer(
    suite: AgentSuite, make_text: Callable[..., list[Chunk]]
) -> None:
    with suite.upstream(make_text(["hello"])):
        suite.run("--llm-proxy-mode=record")
    suite.keyless("http://127.0.0.1:9")  # from here on, no key at all, and nothing answers

    suite.write(PROMPT_TEST.format(calls=1, prompt="hello there"))
    drifted = suite.run()
    drifted.assert_outcomes(failed=1, errors=1)  # the changed prompt is refused in replay
    before = suite.files()

    # A change that needs another call cannot keep recorded answers: the old one stays.
    suite.write(PROMPT_TEST.format(calls=2, prompt="hello there"))
    more = suite.run("--llm-proxy-mode=accept")
    more.assert_outcomes(failed=1, errors=1)
    more.stdout.fnmatch_lines(["*recorded answers do not fit the new requests*is kept as it was*"])
    assert suite.files() == before

    suite.write(PROMPT_TEST.format(calls=1, prompt="hello there"))
    accepted = suite.run("--llm-proxy-mode=accept", "-s")
    accepted.assert_outcomes(passed=1)
    accepted.stdout.fnmatch_lines(["*the model was NOT asked again (1 changed request(s))*"])
    text = "".join(p.read_text() for p in suite.recording.glob("*.jsonl"))
    assert "hello there" in text  # the new prompt…
    assert '"hello"' in text  # …and the old answer
    assert sorted(before) == _names(list(suite.recording.iterdir()))  # the same file names
    suite.run().assert_outcomes(passed=1)
