"""The key scan flags anything that looks like an API key, naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_snapshot import scan_file, scan_folder


@pytest.mark.parametrize(
    "line",
    [
        '{"text":"key sk-abcdefghijklmnop1234"}',
        '{"text":"sk-proj-ABCDEFGHIJKLMNOPQRSTUV"}',
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
        'api_key = "A1b2C3d4E5f6G7h8I9j0K1l2"',
        '"apiKey": "A1b2C3d4E5f6G7h8I9j0K1l2"',
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAABCDEFGHIJKLMNOP",
    ],
)
def test_key_like_strings_are_found(tmp_path: Path, line: str) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text('{"ok":1}\n' + line + "\n", encoding="utf-8")
    findings = scan_file(path)
    assert [f.line for f in findings] == [2]
    assert str(findings[0]).startswith(f"{path}:2: looks like ")


@pytest.mark.parametrize(
    "line",
    [
        '{"usage":{"inputTokens":878,"outputTokens":22,"reasoningTokens":19}}',
        '{"text":"ask-me anything"}',
        '{"text":"sk-short"}',
        '{"id":"call_00_dBV9uE0cJ9MOrMPz5nD5Lw1S"}',
    ],
)
def test_ordinary_fixture_lines_pass(tmp_path: Path, line: str) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    assert scan_file(path) == []


def test_live_key_value_is_found_even_without_a_pattern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "plainvalue123")
    path = tmp_path / "stdout.expected.jsonl"
    path.write_text('{"a":1}\n{"t":"x plainvalue123 y"}\n', encoding="utf-8")
    findings = scan_file(path)
    assert [(f.line, f.kind) for f in findings] == [(2, "the value of DEEPSEEK_API_KEY")]


def test_folder_scan_covers_workspace_and_hidden_files(tmp_path: Path) -> None:
    key = "sk-" + "0123456789abcdef" * 2
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text(f"{key}\n")
    (tmp_path / ".hidden").write_text(f"{key}\n")
    findings = scan_folder(tmp_path)
    assert sorted(f.file for f in findings) == [".hidden", "workspace/notes.txt"]
    assert all(key not in str(f) for f in findings)
