"""The CLI and the pytest plugin are front ends over one engine: for the same scenarios they
print the same summary line and apply the same record policy (the engine's
``record_preflight``): skip without a key, stop before any scenario when the endpoint refuses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import ScenarioFiles
from dsh_core.plugins import env_prefix, model_env_prefixes
from dsh_snapshot._engine import Tally
from dsh_snapshot._live import key_name, live_provider
from dsh_snapshot.testing import INPUT, META, fake_key, write

InnerPytest = Callable[..., subprocess.CompletedProcess[str]]

_SUMMARY = re.compile(r"\d+ scenarios \(\d+ runs\).*")


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would steer either front end."""
    drop = ("DSH_", "PYTEST_", *model_env_prefixes())
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)} | extra


def _cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("dsh-snapshot")
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _lacking(folder: Path) -> None:
    """An upstream-shaped folder driving an op we do not have: ``needs``, never run."""
    write(folder / ScenarioFiles.INPUT, json.dumps({"steps": [{"op": "waitForTurnEnd"}]}))
    write(folder / ScenarioFiles.PRIMARY, '{"type":"session","version":0,"id":"x","createdAt":0}\n')
    write(folder / "stdout.golden.jsonl", "")


def _holding_a_key(folder: Path) -> None:
    """A scenario of ours that the key scan refuses before it runs: a failure."""
    write(folder / ScenarioFiles.INPUT, json.dumps(INPUT))
    write(folder / ScenarioFiles.META, META)
    write(folder / "workspace" / "notes.txt", f"key = {fake_key()}\n")


# Two agent runs and two interpreters: in `nox -s tests_slow` (CI runs it), not the test command.
@pytest.mark.slow
@pytest.mark.e2e
def test_both_front_ends_print_the_same_summary_line(
    scenario_copy: Callable[[str], Path], tmp_path: Path, inner_pytest: InnerPytest
) -> None:
    scenario_copy("text-turn")  # passes
    _lacking(tmp_path / "sdk" / "lacking")
    _holding_a_key(tmp_path / "sdk" / "holding-a-key")
    env = _clean_env()
    cli = _cli(tmp_path, env, "replay", "--store", "jsonl", "--jobs", "1", "sdk")
    assert cli.returncode == 1, cli.stdout + cli.stderr
    [line] = [m.group(0) for m in map(_SUMMARY.search, cli.stdout.splitlines()) if m]
    assert line == (
        "3 scenarios (3 runs), 1 sessions, 1 model calls replayed: 1 passed, 1 failed, "
        "1 need what we lack"
    )
    plugin = inner_pytest(tmp_path, "--dsh-snapshots", "sdk", "--dsh-store", "jsonl", env=env)
    assert plugin.returncode == 1, plugin.stdout + plugin.stderr
    assert f"dsh-snapshot: {line}\n" in plugin.stdout


def test_the_tally_is_the_summary_line_whichever_way_it_is_filled() -> None:
    tally = Tally(malformed=1)
    tally.add("sdk/a", "pass", 2, 3, replaying=True)
    tally.add("sdk/a", "fail", 1, 1, replaying=True)
    tally.add("sdk/b", "needs", 0, 0, replaying=True)
    assert tally.line() == (
        "3 scenarios (3 runs), 3 sessions, 4 model calls replayed: 1 passed, 2 failed "
        "(1 malformed), 1 need what we lack"
    )
    tally.add("sdk/c", "pass", 1, 1, replaying=False)
    assert "5 model calls made" in tally.line()


def _scenario(tmp_path: Path) -> Path:
    folder = tmp_path / "sdk" / "x"
    write(folder / ScenarioFiles.INPUT, json.dumps(INPUT))
    write(folder / ScenarioFiles.META, META)
    return folder


def test_without_a_key_both_front_ends_skip_the_record_with_one_reason(
    tmp_path: Path, inner_pytest: InnerPytest
) -> None:
    folder = _scenario(tmp_path)
    reason = f"skipped: no {key_name(live_provider())} in the environment or ./.env"
    env = _clean_env()
    cli = _cli(tmp_path, env, "record", "sdk")
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert cli.stdout.startswith(f"dsh-snapshot record: {reason} (")
    plugin = inner_pytest(tmp_path, "--dsh-snapshots", "sdk", "-rs", env=env | _RECORD)
    assert plugin.returncode == 0, plugin.stdout + plugin.stderr
    assert f"record: {reason}" in plugin.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["input.json", "snapshot.yml"]


_RECORD = {"DSH_SNAPSHOT": "record"}


@pytest.mark.slow  # the endpoint check's client stack in two interpreters; tests_slow
def test_an_unreachable_endpoint_stops_both_front_ends_before_any_scenario(
    tmp_path: Path, inner_pytest: InnerPytest
) -> None:
    folder = _scenario(tmp_path)
    provider = live_provider()
    prefix, name = env_prefix(provider), key_name(provider)
    assert prefix  # the variables that configure the provider
    assert name is not None
    env = _clean_env(**{
        name: fake_key(),
        f"{prefix}BASE_URL": "http://127.0.0.1:9",
        f"{prefix}RETRY_BASE_WAIT": "0",
    })  # fmt: skip
    where = f"record: {name} is sent to 127.0.0.1:9 only"
    cli = _cli(tmp_path, env, "record", "sdk")
    assert cli.returncode == 1, cli.stdout + cli.stderr
    first, stop = cli.stdout.splitlines()
    assert first == f"dsh-snapshot {where}"
    assert stop.startswith("dsh-snapshot record: stopped before any scenario, nothing written: ")
    plugin = inner_pytest(tmp_path, "--dsh-snapshots", "sdk", env=env | _RECORD)
    assert plugin.returncode == 1, plugin.stdout + plugin.stderr
    assert where in plugin.stderr
    assert stop.removeprefix("dsh-snapshot ") in plugin.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["input.json", "snapshot.yml"]
