"""Settings from the environment, ``from_settings``, and the pinned public API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import dsh_llm_replay
from dsh_core import Event, SessionHeader, assistant_chunk, render_log
from dsh_llm_replay import ReplayError, ReplayModelClient, ReplaySettings

ENV = [
    "DSH_SNAPSHOT_FILE",
    "DSH_SNAPSHOT_OVERRIDE",
    "DSH_SNAPSHOT_CHILD_FILES",
    "DSH_REPLAY_SEED_SLICE",
    "DSH_REPLAY_REPORT",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def write_log(
    path: Path,
    session_id: str,
    created_at: int,
    seed_length: int | None = None,
    answers: tuple[str, ...] = ("x",),
) -> Path:
    events: list[Event] = []
    for step, answer in enumerate(answers, 1):
        for chunk in (
            {"type": "text-delta", "index": 0, "text": answer},
            {"type": "finish", "reason": {"kind": "stop"}},
        ):
            events.append(assistant_chunk(len(events), 0, 1, step, chunk))  # pyright: ignore
    header = SessionHeader(session_id, created_at, seed_length=seed_length)
    path.write_text(render_log(header, events), encoding="utf-8")
    return path


def test_replay_settings_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(tmp_path / "session.jsonl"))
    monkeypatch.setenv("DSH_SNAPSHOT_OVERRIDE", str(tmp_path / "replay.override.json"))
    monkeypatch.setenv(
        "DSH_SNAPSHOT_CHILD_FILES",
        os.pathsep.join([str(tmp_path / "session.2.jsonl"), "", str(tmp_path / "session.1.jsonl")]),
    )
    monkeypatch.setenv("DSH_REPLAY_SEED_SLICE", "false")
    monkeypatch.setenv("DSH_REPLAY_REPORT", str(tmp_path / "report.json"))
    settings = ReplaySettings()  # pyright: ignore[reportCallIssue]
    assert settings.snapshot_file == tmp_path / "session.jsonl"
    assert settings.snapshot_override == tmp_path / "replay.override.json"
    assert settings.child_files == (tmp_path / "session.2.jsonl", tmp_path / "session.1.jsonl")
    assert settings.seed_slice is False
    assert settings.report == tmp_path / "report.json"


def test_replay_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", "s.jsonl")
    monkeypatch.setenv("DSH_SNAPSHOT_OVERRIDE", "")  # empty means unset
    monkeypatch.setenv("DSH_SNAPSHOT_CHILD_FILES", "")
    settings = ReplaySettings()  # pyright: ignore[reportCallIssue]
    assert (
        settings.snapshot_override,
        settings.child_files,
        settings.seed_slice,
        settings.report,
    ) == (None, (), True, None)


@pytest.mark.parametrize("full", [True, False])
def test_replay_settings_round_trip_through_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, full: bool
) -> None:
    """What the runner hands over with ``to_env`` is exactly what the agent reads back."""
    given = ReplaySettings(  # pyright: ignore[reportCallIssue]
        snapshot_file=tmp_path / "session.jsonl",
        snapshot_override=tmp_path / "replay.override.json" if full else None,
        child_files=(tmp_path / "session.2.jsonl", tmp_path / "session.1.jsonl") if full else (),
        seed_slice=not full,
        report=tmp_path / "report.json" if full else None,
        child_jitter_ms=7 if full else 0,
        check_headers=not full,
    )
    env = given.to_env()
    for name in list(os.environ):
        if name.startswith("DSH_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert ReplaySettings() == given  # pyright: ignore[reportCallIssue]
    if full:
        assert env["DSH_REPLAY_SEED_SLICE"] == "false"
        assert env["DSH_REPLAY_CHECK_HEADERS"] == "false"
        assert env["DSH_SNAPSHOT_CHILD_FILES"].split(os.pathsep)[0].endswith("session.2.jsonl")
    else:
        # Unset optional fields are left out rather than written as empty values.
        kept = {
            "DSH_SNAPSHOT_FILE",
            "DSH_REPLAY_SEED_SLICE",
            "DSH_REPLAY_CHILD_JITTER_MS",
            "DSH_REPLAY_CHECK_HEADERS",
        }
        assert set(env) == kept


def test_replay_from_settings_loads_the_scenario(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    primary = write_log(tmp_path / "session.jsonl", "p", 1)
    seed_and_own = write_log(
        tmp_path / "session.1.jsonl", "c", 2, seed_length=2, answers=("parent", "own")
    )
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(primary))
    monkeypatch.setenv("DSH_SNAPSHOT_CHILD_FILES", str(seed_and_own))
    monkeypatch.setenv("DSH_REPLAY_REPORT", str(tmp_path / "report.json"))
    client = ReplayModelClient.from_settings()
    assert [len(s.entries) for s in client.scripts] == [1, 1]
    assert client.report_path == tmp_path / "report.json"
    monkeypatch.setenv("DSH_REPLAY_SEED_SLICE", "0")
    assert [len(s.entries) for s in ReplayModelClient.from_settings().scripts] == [1, 2]
    explicit = ReplaySettings(snapshot_file=primary)  # pyright: ignore[reportCallIssue]
    assert [s.header.id for s in ReplayModelClient.from_settings(explicit).scripts] == ["p", "c"]


def test_replay_from_settings_without_a_file_is_a_replay_error() -> None:
    with pytest.raises(ReplayError, match="replay settings are invalid: DSH_SNAPSHOT_FILE"):
        ReplayModelClient.from_settings()


def test_replay_from_settings_with_a_bad_switch_is_a_replay_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", "s.jsonl")
    monkeypatch.setenv("DSH_REPLAY_SEED_SLICE", "maybe")
    with pytest.raises(ReplayError, match="DSH_REPLAY_SEED_SLICE"):
        ReplayModelClient.from_settings()


def test_replay_public_api_is_pinned() -> None:
    assert sorted(dsh_llm_replay.__all__) == sorted(
        [
            "CHUNK_TYPES",
            "ChunksEntry",
            "DelegatedCall",
            "HangEntry",
            "NotConsumedError",
            "Override",
            "OverrideDocument",
            "OverrideError",
            "LIVE_PROVIDER_ENV",
            "REPLAY_REQUEST_CONFIG",
            "REPORT_VERSION",
            "HeaderDifference",
            "HeaderStatus",
            "RecordedHeaders",
            "RequestDriftError",
            "around_difference",
            "first_header_difference",
            "recorded_headers",
            "ReplayCallError",
            "ReplayEntry",
            "ReplayError",
            "ReplayHeader",
            "ReplayModelClient",
            "ReplayReport",
            "ReplaySettings",
            "ReportError",
            "ReportFormatError",
            "ReportScript",
            "ReportSession",
            "ScriptExhaustedError",
            "SessionScript",
            "ThrowEntry",
            "UnrecordedSessionError",
            "UnterminatedGroupError",
            "check_report",
            "derive_replay_script",
            "load_override",
            "load_session_scripts",
            "parse_override",
            "parse_session_header",
            "parse_session_log",
        ]
    )
    for name in dsh_llm_replay.__all__:
        assert getattr(dsh_llm_replay, name) is not None
