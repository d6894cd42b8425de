"""``tools/record_drift.py`` (nox -s record_drift): which scenarios a re-record changed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_snapshot.testing import copy_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "snapshots" / "sdk" / "text-turn"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "record_drift.py"), *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None or not SCENARIO.is_dir():
        pytest.skip("needs git and the committed text-turn scenario")
    copy_scenario(SCENARIO, tmp_path / "snapshots")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "fixtures")
    return tmp_path


def test_a_scenario_whose_fixtures_changed_is_reported_as_drifted(repo: Path) -> None:
    folder = repo / "snapshots" / "sdk" / "text-turn"
    summary = repo / "summary.md"
    clean = _run(repo, "--output", str(summary))
    assert clean.returncode == 0, clean.stderr
    assert "## Live re-record: 0 of 1 scenarios drifted" in clean.stdout
    assert "| sdk/text-turn | scripted | - | - | met | no drift |" in clean.stdout
    # A re-record that rewrote snapshot.yml (provenance) and the stdout fixture, and added a child.
    (folder / "snapshot.yml").write_text((folder / "snapshot.yml").read_text() + "# new\n")
    stdout = folder / "stdout.expected.jsonl"
    stdout.write_text(stdout.read_text() + "\n")
    (folder / "session.1.jsonl").write_text("{}\n")
    drift = _run(repo, "snapshots")
    assert drift.returncode == 0, drift.stderr
    assert "## Live re-record: 1 of 1 scenarios drifted" in drift.stdout
    assert "| met | session.1.jsonl, stdout.expected.jsonl |" in drift.stdout
    assert summary.read_text() == clean.stdout


def test_a_recording_that_misses_its_expectations_fails_the_report(repo: Path) -> None:
    primary = repo / "snapshots" / "sdk" / "text-turn" / "session.jsonl"
    primary.write_text(primary.read_text().replace("PONG", "PING"))
    result = _run(repo)
    assert result.returncode == 1
    assert "**MISSED**" in result.stdout
    assert "prompt 1: expected final message matching" in result.stdout


def test_a_folder_outside_git_is_a_clear_error(tmp_path: Path) -> None:
    if not SCENARIO.is_dir():
        pytest.skip("needs the committed text-turn scenario")
    copy_scenario(SCENARIO, tmp_path)
    result = _run(tmp_path, str(tmp_path))
    assert result.returncode == 2
    assert "not in a git checkout (drift is measured against HEAD)" in result.stderr


def test_scenario_data_cannot_rewrite_the_job_summary(repo: Path) -> None:
    # a profile that ends the table, forges a heading and comments out the rows after it
    yml = repo / "snapshots" / "sdk" / "text-turn" / "snapshot.yml"
    forged = "sdk |\\n\\n## ALL SCENARIOS MET\\n\\n<!-- \\u202e [x](http://evil.invalid) *"
    yml.write_text(yml.read_text().replace("profile: sdk", f'profile: "{forged}"'))
    result = _run(repo)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| sdk")]
    assert len(rows) == 1, result.stdout
    assert rows[0].count(" | ") == 5  # still six cells: the profile's | is escaped
    assert "\n## ALL" not in result.stdout
    assert re.search(r"(?<!\\)<", result.stdout) is None  # every < escaped: no HTML comment
    assert "\u202e" not in result.stdout
    assert r"\<!--" in rows[0]
    assert r"\[x\](http://evil.invalid)" in rows[0]
    assert r"\u202e" in rows[0]
