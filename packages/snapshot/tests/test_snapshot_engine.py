"""The one engine: ``select`` and ``run`` over ``SnapshotSettings``, and the CLI as a front end
that only builds the settings and calls it (the plugin's side: test_snapshot_plugin.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import dsh_snapshot._batch as batch
import dsh_snapshot.cli
from dsh_core.plugins import (
    DEFAULT_MODEL_PROVIDER,
    DEFAULT_STORE_BACKEND,
    default_store_backend_names,
)
from dsh_scripted_server import resolve_profile
from dsh_snapshot import (
    ScenarioResult,
    SnapshotSettings,
    load_scenario,
    run,
    run_scenario,
    select,
)
from dsh_snapshot import _engine as engine  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.e2e


def _broken(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": [{"op": "initialize"}]}))
    (folder / "snapshot.yml").write_text("version: 7\n")


def test_select_finds_scenarios_and_applies_the_k_filter_to_malformed_ones_too(
    scenario_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    scenario_copy("text-turn")
    scenario_copy("multi-turn")
    _broken(tmp_path / "sdk" / "broken-turn")
    everything = select(SnapshotSettings(paths=(tmp_path,)))
    assert [s.name for s in everything.scenarios] == ["sdk/multi-turn", "sdk/text-turn"]
    assert [b.name for b in everything.broken] == ["sdk/broken-turn"]
    narrowed = select(SnapshotSettings(paths=(tmp_path,), names=("TEXT",)))
    assert [s.name for s in narrowed.scenarios] == ["sdk/text-turn"]
    assert narrowed.broken == []


def test_settings_refuse_bad_values_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="jobs"):
        SnapshotSettings(jobs=0)
    with pytest.raises(ValidationError, match="stores"):
        SnapshotSettings(stores=())
    with pytest.raises(ValidationError, match="mode"):
        SnapshotSettings.model_validate({"mode": "replay-everything"})


def test_the_key_is_never_in_the_settings_repr() -> None:
    settings = SnapshotSettings(mode="record", api_key="sk-live-secret")  # pyright: ignore[reportArgumentType]
    assert "sk-live-secret" not in repr(settings)
    assert settings.key == "sk-live-secret"


def test_run_pairs_scenarios_with_backends_and_writes_only_from_the_first(
    scenario_copy: Callable[[str], Path],
) -> None:
    scenario = load_scenario(scenario_copy("text-turn"))
    both = ("jsonl", "sqlite")
    replayed = run(SnapshotSettings(jobs=2, stores=both), [scenario])
    assert [(r.store, r.ok) for r in replayed] == [("jsonl", True), ("sqlite", True)]
    refreshed = run(SnapshotSettings(mode="refresh", stores=both), [scenario])
    assert [(r.store, r.mode, r.ok) for r in refreshed] == [("jsonl", "refresh", True)]


def test_the_default_backends_are_every_installed_embedded_one_the_default_first() -> None:
    installed = SnapshotSettings().stores
    assert installed[0] == DEFAULT_STORE_BACKEND
    assert list(installed) == default_store_backend_names()
    assert SnapshotSettings(mode="refresh").run_stores == (DEFAULT_STORE_BACKEND,)


def test_a_loop_profile_setting_overrides_the_scenarios_own(
    scenario_copy: Callable[[str], Path],
) -> None:
    """``subagent-parallel`` was recorded with the ``current`` loop (parallel tool calls):
    forced to ``june``, the same recording must no longer replay."""
    scenario = load_scenario(scenario_copy("subagent-parallel"))
    assert scenario.loop == "current"
    [own] = run(SnapshotSettings(stores=("jsonl",)), [scenario])
    assert own.ok, own.failures
    [forced] = run(SnapshotSettings(stores=("jsonl",), loop="june", cold=True), [scenario])
    assert not forced.ok


def test_a_bug_in_one_run_costs_that_run_not_the_batch(
    scenario_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = load_scenario(scenario_copy("text-turn"))
    bad = load_scenario(scenario_copy("multi-turn"))
    real = run_scenario

    def flaky(scenario: Any, *args: Any) -> ScenarioResult:
        if scenario is bad:
            raise RuntimeError("a bug of ours")
        return real(scenario, *args)

    monkeypatch.setattr(engine, "run_scenario", flaky)
    results = run(SnapshotSettings(stores=("jsonl",)), [good, bad])
    assert [r.ok for r in results] == [True, False]
    assert results[1].failures == ["internal error: RuntimeError('a bug of ours')"]


def test_a_scripted_recording_that_misses_its_expectations_is_not_retried(
    scenario_copy: Callable[[str], Path],
) -> None:
    folder = scenario_copy("text-turn")
    meta = folder / "snapshot.yml"
    meta.write_text(meta.read_text().replace('"\\\\bPONG\\\\b"', '"NEVER-SAID-THIS"'))
    assert "NEVER-SAID-THIS" in meta.read_text()
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    attempts: list[int] = []
    settings = SnapshotSettings(mode="record-scripted", retries=3)
    [result] = run(settings, [load_scenario(folder)], lambda r: attempts.append(r.attempts))
    assert attempts == [1], "a scripted model would only answer the same"
    assert not engine.will_retry(settings, result)
    assert result.failures[-1].startswith("still missing its expectations after 1 recordings")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


# --- the front ends ----------------------------------------------------------------------------


class _Spy:
    """Wraps the real engine and keeps the settings each front end handed it."""

    def __init__(self) -> None:
        self.calls: list[SnapshotSettings] = []

    def __call__(
        self,
        settings: SnapshotSettings,
        scenarios: Sequence[Any] | None = None,
        *rest: Any,
        **options: Any,
    ) -> list[ScenarioResult]:
        self.calls.append(settings)
        return run(settings, scenarios, *rest, **options)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    """The engine as the CLI (and the proof it prints) calls it, spied on."""
    engine_spy = _Spy()
    monkeypatch.setattr(dsh_snapshot.cli, "run", engine_spy)
    monkeypatch.setattr(batch, "run", engine_spy)
    return engine_spy


def test_the_cli_builds_settings_from_its_flags_and_runs_the_engine(
    scenario_copy: Callable[[str], Path],
    tmp_path: Path,
    spy: _Spy,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario_copy("text-turn")
    scenario_copy("multi-turn")
    argv = ["replay", str(tmp_path), "-k", "text", "--store", "sqlite", "--jobs", "1"]
    status = dsh_snapshot.cli.main([*argv, "--cold", "--timeout", "30"])
    assert status == 0, capsys.readouterr().out
    [settings] = spy.calls
    assert settings == SnapshotSettings(
        paths=(tmp_path,),
        names=("text",),
        stores=("sqlite",),
        jobs=1,
        cold=True,
        timeout=30,
    )
    out = capsys.readouterr().out
    assert "1 scenarios (1 runs), 1 sessions, 1 model calls replayed: 1 passed, 0 failed" in out


def test_the_cli_refresh_and_proof_go_through_the_engine(
    scenario_copy: Callable[[str], Path],
    tmp_path: Path,
    spy: _Spy,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario_copy("text-turn")
    scenario_copy("subagent-fork-in-process")
    assert dsh_snapshot.cli.main(["refresh", str(tmp_path / "sdk" / "text-turn")]) == 0
    assert [s.mode for s in spy.calls] == ["refresh"]
    assert dsh_snapshot.cli.main(["proof", str(tmp_path), "--jobs", "1"]) == 0
    assert [(s.mode, s.seed_slice, s.stores) for s in spy.calls[1:]] == [
        ("replay", False, ("jsonl",)),
        ("replay", True, ("jsonl",)),
    ]
    assert "proof holds" in capsys.readouterr().out


def test_a_refresh_keeps_a_live_recordings_provenance(
    scenario_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh replays what was recorded live: the model and the day of that recording stay,
    whatever the local settings and today's date are (else a refresh on a later day would
    rewrite a committed file)."""
    folder = scenario_copy("text-turn")
    meta = folder / "snapshot.yml"
    meta.write_text(
        meta.read_text().replace("recording: scripted", "recording: live")
        + "provenance:\n  provider: deepseek\n  model: deepseek-old\n  dshVersion: 0.0.1\n"
        "  recordedAt: '2020-01-02'\n  tokens:\n    calls: 1\n    input: 10\n    output: 5\n"
        "    cacheRead: 0\n    reasoning: 0\n"
    )
    before = meta.read_bytes()
    monkeypatch.setenv(resolve_profile(DEFAULT_MODEL_PROVIDER).env_name("model"), "deepseek-new")
    [result] = run(SnapshotSettings(mode="refresh"), [load_scenario(folder)])
    assert result.ok, result.failures
    assert meta.read_bytes() == before
