"""Issue #15's sharp edges of dsh-snapshot's command line, one table row each, run against the
installed console script as a real subprocess (stdin closed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

_BIN = Path(sys.executable).parent
_GOOD = Path(__file__).resolve().parents[3] / "snapshots" / "sdk" / "tool-call-turn"


def _run(script: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_BIN / script), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


@dataclass(frozen=True)
class Edge:
    """One sharp edge: the arguments (``{tmp}`` is the test's folder), the exit status, and
    text that must appear in stdout + stderr (and text that must not)."""

    name: str
    args: tuple[str, ...]
    status: int
    says: tuple[str, ...]
    never: tuple[str, ...] = ("Traceback",)
    layout: dict[str, str] = field(default_factory=dict[str, str])


# Ours (it has snapshot.yml), so the broken input.json is what the row reports.
_BAD_JSON = {
    "sdk/broken/snapshot.yml": "version: 1\nprofile: sdk\nrecording: scripted\n",
    "sdk/broken/input.json": '{"steps": [',
}
_EDGES = [
    Edge("jobs-not-a-number", ("replay", "{tmp}", "--jobs", "x"), 2, ("'x' is neither",)),
    Edge("jobs-zero", ("replay", "{tmp}", "--jobs", "0"), 2, ("'0' is neither",)),
    Edge("timeout-negative", ("replay", "{tmp}", "--timeout", "-1"), 2, ("at least",)),
    Edge("timeout-nan", ("refresh", "{tmp}", "--timeout", "nan"), 2, ("at least",)),
    Edge("retries-negative", ("record", "{tmp}", "--retries", "-3"), 2, ("at least 0",)),
    Edge("max-age-word", ("list", "{tmp}", "--max-age", "old"), 2, ("whole number",)),
    Edge("store", ("replay", "{tmp}", "--store", "pg"), 2, ("unknown store backend",)),
    Edge("old-option-name", ("replay", "{tmp}", "--composition", "pg"), 2, ("unknown store",)),
    Edge("missing-path", ("list", "{tmp}/nowhere"), 2, ("no such scenario folder",)),
    Edge("empty-list", ("list", "{tmp}"), 1, ("no scenarios",)),
    Edge("empty-replay", ("replay", "{tmp}"), 1, ("no scenarios",)),
    Edge("empty-proof", ("proof", "{tmp}"), 1, ("no scenarios",)),
    Edge(
        "file-outside-scenario",
        ("replay", "{tmp}/notes.txt"),
        2,
        ("outside any scenario folder",),
        layout={"notes.txt": "hello"},
    ),
    Edge(
        "malformed-in-list-is-a-row",
        ("list", "{tmp}", "{good}"),
        2,
        ("sdk/broken", "MALFORMED", "sdk/tool-call-turn", "2 scenarios, 1 malformed"),
        layout=_BAD_JSON,
    ),
    Edge(
        "malformed-in-replay-is-a-row-and-the-rest-runs",
        ("replay", "{tmp}", "{good}", "--store", "jsonl", "--jobs", "1"),
        2,
        ("MALFORMED sdk/broken", "invalid JSON", "1 passed, 1 failed (1 malformed)"),
        layout=_BAD_JSON,
    ),
    Edge(
        "input-json-means-its-folder",
        ("replay", "{good}/input.json", "--store", "jsonl"),
        0,
        ("1 scenarios (1 runs)", "1 passed, 0 failed"),
    ),
    Edge(
        "k-filters-by-name",
        ("list", "{tmp}", "{good}", "-k", "TOOL-call"),
        0,
        ("sdk/tool-call-turn", "1 scenarios"),
        never=("sdk/broken", "Traceback"),
        layout=_BAD_JSON,
    ),
    Edge("k-matching-nothing", ("list", "{good}", "-k", "zzz"), 1, ("matching -k zzz",)),
]


@pytest.mark.parametrize("edge", _EDGES, ids=[e.name for e in _EDGES])
def test_dsh_snapshot_edge(edge: Edge, tmp_path: Path) -> None:
    for relative, text in edge.layout.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    args = [a.format(tmp=tmp_path, good=_GOOD) for a in edge.args]
    done = _run("dsh-snapshot", *args, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == edge.status, output
    for text in edge.says:
        assert text in output, (text, output)
    for text in edge.never:
        assert text not in output, (text, output)


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    done = _run("dsh-snapshot", "replay", str(tmp_path), "--jobs", "x")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_dsh_snapshot_answers_help_and_version(flag: str) -> None:
    # Every workspace script is checked alike in tests/test_console_scripts.py.
    done = _run("dsh-snapshot", flag)
    assert done.returncode == 0, done.stderr
    assert "`" not in done.stdout
    assert done.stdout.startswith("dsh-snapshot 0" if flag == "--version" else "usage:")


@pytest.mark.slow  # >= 2.5 s: nox -s tests_slow (the test command's 4-minute budget)
def test_subcommand_help_has_no_backticks_and_documents_exit_codes() -> None:
    for command in ("replay", "refresh", "record", "proof", "list", "review", "accept"):
        done = _run("dsh-snapshot", command, "--help")
        assert done.returncode == 0
        assert "`" not in done.stdout, command
        assert "exit status: 0" in done.stdout.replace("\n", " "), command


def test_scenario_fixture_is_a_real_scenario() -> None:
    assert json.loads((_GOOD / "input.json").read_text())["steps"]


@pytest.mark.parametrize(
    ("args", "summary"),
    [
        (("record", "--scripted"), "1 scenarios (1 runs), 1 sessions, 2 model calls made"),
        (("refresh",), "1 scenarios (1 runs), 1 sessions, 2 model calls replayed"),
        (("replay", "--store", "jsonl"), "1 sessions, 2 model calls replayed: 1 passed"),
    ],
    ids=["record-scripted", "refresh", "replay"],
)
def test_summary_counts_are_true_in_every_mode(
    args: tuple[str, ...], summary: str, tmp_path: Path
) -> None:
    # tool-call-turn makes exactly two model calls in one session (its script has two entries).
    copy = shutil.copytree(_GOOD, tmp_path / "sdk" / _GOOD.name)
    [script] = json.loads((copy / "model.script.json").read_text())["sessions"]
    assert len(script) == 2
    done = _run("dsh-snapshot", args[0], str(copy), *args[1:], "--jobs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary in done.stdout, done.stdout
