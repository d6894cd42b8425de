"""The key scan is linear in its input and scans each content once (issues 20 and 24)."""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path

import pytest

from dsh_snapshot import KeyFinding, scan_file
from dsh_snapshot import _keyscan as keyscan
from dsh_snapshot._detect import _PLUGINS, detectors, python_fallbacks, screened  # pyright: ignore[reportPrivateUsage]
from dsh_snapshot._keyscan import digest
from dsh_snapshot._scancache import CACHE_DIR_ENV, clear

# Lines each detector answers: the linear versions must answer as detect-secrets does.
_SHORT_LINES = [
    'password = "hunter2hunter2"',
    "api_key: 'abcdefabcdef1234'",
    'OPENAI_API_KEY: "placeholder"',
    'secret => "x1234567"',
    '"abcdefgh" == password',
    "`abc` != my_password",
    'my_password="abc";',
    'db_pass("a1b2c3d4")',
    "pwd = `a`, other",
    "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefgh",
    "sk-" + "a" * 20 + "T3BlbkFJ" + "b" * 20,
    "//registry/:_authToken=npm_" + "c" * 36,
    "https://user:pa55word@example.org/x",
    "AKIA" + "Q" * 16,
    "glpat-" + "x" * 20,
    "glagent-" + "a" * 60,
    "GR1348941" + "c" * 25 + " and more",
    "xoxb-1234-abcdef",
]


def _reference(line: str) -> list[list[str]]:
    """What each detect-secrets plugin itself yields for ``line``."""
    out: list[list[str]] = []
    for dotted in _PLUGINS:
        name, cls = dotted.rsplit(".", 1)
        plugin = getattr(import_module(f"detect_secrets.plugins.{name}"), cls)()
        out.append(list(plugin.analyze_string(line)))
    return out


@pytest.mark.parametrize("line", _SHORT_LINES)
def test_the_linear_detectors_find_what_detect_secrets_finds(line: str) -> None:
    assert [list(find(line)) for _kind, find in detectors()] == _reference(line)


_ORDINARY = ['{"usage":{"inputTokens":878,"outputTokens":22}}', '{"text":"ask-me anything"}', ""]


@pytest.mark.parametrize("line", _SHORT_LINES + _ORDINARY)
def test_the_screen_skips_only_detectors_that_find_nothing(line: str) -> None:
    """One RE2 alternation stands for every regex detector's RE2 patterns: where it finds
    nothing, what still runs (the keyword detector, the Python-engine patterns) finds all
    that every detector finds."""
    screen, every, rest = screened()
    assert screen is not None
    assert every == detectors()
    full = [(kind, list(find(line))) for kind, find in every]
    used = every if screen.search(line) is not None else rest
    quick = [(kind, list(find(line))) for kind, find in used]
    assert [(k, v) for k, v in full if v] == [(k, v) for k, v in quick if v]


def test_the_screen_passes_over_ordinary_text() -> None:
    screen, _, rest = screened()
    assert all(screen.search(line) is None for line in _ORDINARY)
    assert len(rest) < len(detectors())  # the screen saves work there


def test_only_bounded_patterns_stay_in_pythons_engine() -> None:
    # RE2 cannot parse these (look-aheads); each is a literal prefix and a bounded
    # repetition, so Python's engine reads each start position a bounded number of times.
    fallbacks = python_fallbacks()
    assert fallbacks, "GitLab's look-ahead patterns are expected here"
    for pattern in fallbacks:
        assert not re.search(r"(?<!\\)[*+]|\{\d+,\}", pattern), pattern


@pytest.mark.parametrize(
    "filler",
    ["-sk", "password", "secret_", "password=`a ", "eyJa", '"a" == password ', "%25", "\\\\u0041"],
)
def test_a_crafted_long_line_is_scanned_and_the_key_after_it_found(
    tmp_path: Path, filler: str
) -> None:
    # Each filler made one detect-secrets pattern backtrack from every start position: a
    # 375 KiB line took minutes (bench_keyscan.py measures it). The key after it is found.
    key = "sk-" + "q1" * 16
    path = tmp_path / "session.jsonl"
    path.write_text(filler * (64 * 1024 // len(filler)) + " " + key + "\n", encoding="utf-8")
    assert digest(key) in {f.hash for f in scan_file(path)}


def test_too_many_findings_in_one_file_stop_the_scan_with_one_finding(tmp_path: Path) -> None:
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(f"sk-{i:04d}{'k' * 24}" for i in range(200)), encoding="utf-8")
    [finding] = scan_file(path)
    assert finding.line == 0
    assert "more than 64 values" in finding.kind
    assert str(finding).startswith(f"{path}: ")


def test_the_same_content_is_scanned_once_and_a_new_secret_rescans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    real = keyscan._scan_bytes  # pyright: ignore[reportPrivateUsage]

    def counting(
        data: bytes, path: Path, name: str, keys: tuple[tuple[str, str], ...]
    ) -> list[KeyFinding]:
        calls.append(path)
        return real(data, path, name, keys)

    monkeypatch.setattr(keyscan, "_scan_bytes", counting)
    clear()
    key = "sk-" + "z9" * 16
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(f"x\n{key}\n", encoding="utf-8")
    first, second = scan_file(tmp_path / "a.txt"), scan_file(tmp_path / "b.txt", "b.txt")
    assert len(calls) == 1  # same bytes: one scan, findings named for each file
    assert [(f.path, f.line, f.hash, f.file) for f in second] == [
        (tmp_path / "b.txt", 2, digest(key), "b.txt")
    ]
    assert [f.hash for f in first] == [f.hash for f in second]
    scan_file(tmp_path / "a.txt", literals=["another-live-key-value"])
    assert len(calls) == 2  # another secret to look for is another scan


def test_the_cache_dir_keeps_findings_across_processes_and_survives_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    key = "sk-" + "c4" * 16
    path = tmp_path / "f.txt"
    path.write_text(f"{key}\n", encoding="utf-8")
    clear()
    found = scan_file(path)
    [entry] = cache.glob("*.json")
    assert entry.is_file()
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert key.encode() not in entry.read_bytes()
    clear()  # a new process: answered from the directory
    assert scan_file(path) == found
    entry.write_text("[[1, 2]", encoding="utf-8")  # damaged: a miss, the file is rescanned
    clear()
    assert scan_file(path) == found
