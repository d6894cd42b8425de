"""The key scan flags anything that looks like an API key, naming file and line."""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core.plugins import secret_env_names
from dsh_snapshot import ScenarioError, load_scenario, redact, scan_file, scan_folder
from dsh_snapshot._keyscan import digest, scan_text
from dsh_snapshot._provenance import with_provenance


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
    assert line.rsplit(maxsplit=1)[-1].strip('"}') not in str(findings[0])


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
    # Any installed provider's key variable: the scan knows them all (secret_env_names).
    name = secret_env_names()[0]
    monkeypatch.setenv(name, "plainvalue123")
    path = tmp_path / "stdout.expected.jsonl"
    path.write_text('{"a":1}\n{"t":"x plainvalue123 y"}\n', encoding="utf-8")
    findings = scan_file(path)
    assert [(f.line, f.kind) for f in findings] == [(2, f"the value of {name}")]


def test_folder_scan_covers_workspace_and_hidden_files(tmp_path: Path) -> None:
    key = "sk-" + "0123456789abcdef" * 2
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "notes.txt").write_text(f"{key}\n")
    (tmp_path / ".hidden").write_text(f"{key}\n")
    findings = scan_folder(tmp_path)
    assert sorted(f.file for f in findings) == [".hidden", "workspace/notes.txt"]
    assert all(key not in str(f) for f in findings)


def _key() -> str:
    return "sk-" + secrets.token_hex(16)


_ENCODINGS: dict[str, Callable[[str], bytes]] = {
    "utf-32-bom": lambda t: t.encode("utf-32"),
    "utf-16-be-no-bom": lambda t: t.encode("utf-16-be"),
    "in-binary": lambda t: b"SQLite\x00\xff" + t.encode("utf-16-le") + b"\x00",
    "percent": lambda t: t.replace("-", "%2D").encode(),
    "base64-twice": lambda t: base64.b64encode(base64.b64encode(t.encode())),
}


@pytest.mark.parametrize("encoding", sorted(_ENCODINGS))
def test_encoded_keys_are_found(tmp_path: Path, encoding: str) -> None:
    key = _key()
    path = tmp_path / "f.bin"
    path.write_bytes(_ENCODINGS[encoding](f"note {key} end"))
    findings = scan_file(path)
    assert [f.hash for f in findings] == [digest(key)]
    assert key not in str(findings[0])


def test_a_link_out_of_the_folder_and_a_fifo_are_findings_never_read(tmp_path: Path) -> None:
    folder = tmp_path / "scenario"
    folder.mkdir()
    (folder / "out").symlink_to(tmp_path)
    os.mkfifo(folder / "pipe")
    kinds = {f.file: f.kind for f in scan_folder(folder)}
    assert kinds["out"].startswith("a symlink leading outside the scenario folder")
    assert kinds["pipe"].startswith("not a regular file")


def _meta(folder: Path, allowlist: str) -> None:
    (folder / "input.json").write_text('{"steps": [{"op": "initialize"}]}')
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nrecording: scripted\nsecrets_allowlist:\n" + allowlist
    )


def test_an_allowlist_entry_hides_exactly_its_finding_and_stale_ones_are_reported(
    tmp_path: Path,
) -> None:
    key = _key()
    (tmp_path / "notes.txt").write_text(f"example: {key}\n")
    entry = f"  - file: notes.txt\n    line: 1\n    hash: {digest(key)}\n    reason: a doc sample\n"
    stale = f"  - file: notes.txt\n    line: 9\n    hash: {digest(key)}\n    reason: moved away\n"
    _meta(tmp_path, entry + stale)
    meta = load_scenario(tmp_path).meta
    assert meta is not None
    findings = scan_folder(tmp_path, meta.secrets_allowlist)
    assert [(f.file, f.line) for f in findings] == [("snapshot.yml", 0)]
    assert "field 'secrets_allowlist.1'" in str(findings[0])
    # A record rewrites snapshot.yml (recording, provenance) and keeps the entries.
    meta_file = tmp_path / "snapshot.yml"
    meta_file.write_text(with_provenance(meta_file.read_text(), "scripted", None))
    assert load_scenario(tmp_path).meta == meta


def test_an_allowlist_entry_is_pinned_to_the_value_not_the_line(tmp_path: Path) -> None:
    key = _key()
    (tmp_path / "notes.txt").write_text(f"example: {key}\n")
    _meta(tmp_path, f"  - file: notes.txt\n    hash: {digest(key)}\n    reason: a doc sample\n")
    meta = load_scenario(tmp_path).meta
    assert meta is not None
    assert scan_folder(tmp_path, meta.secrets_allowlist) == []
    # Lines added above move the value: the entry still covers it.
    (tmp_path / "notes.txt").write_text(f"a new first line\n\nexample: {key}\n")
    assert scan_folder(tmp_path, meta.secrets_allowlist) == []
    # Another value in its place is a finding, and the entry is stale.
    (tmp_path / "notes.txt").write_text(f"example: {_key()}\n")
    assert [f.file for f in scan_folder(tmp_path, meta.secrets_allowlist)] == [
        "notes.txt",
        "snapshot.yml",
    ]


@pytest.mark.parametrize(
    "line",
    [
        'OPENAI_API_KEY: "placeholder"',
        "api_key = 'dummy'",
        'api_key: "your-api-key-here"',
        "api_key: ${OPENAI_API_KEY}",
        "api_key: '{{key}}'",
        "api_key: <your key>",
        "api_key = xxxxxxxxxxxxxxxxxxxx",
        "api_key_env: DSH_PROXY_UPSTREAM_KEY",
        "secret_key = OPENAI_API_KEY",
        'password = "changeme"',
    ],
)
def test_placeholders_and_variable_names_are_not_findings(tmp_path: Path, line: str) -> None:
    assert scan_text(line, tmp_path / "f", "f") == []


def test_a_real_value_beside_a_placeholder_word_is_still_found(tmp_path: Path) -> None:
    key = _key()
    assert len(scan_text(f'api_key = "placeholder-{key}"', tmp_path / "f", "f")) == 1
    assert len(scan_text('password = "hunter2-correct-horse"', tmp_path / "f", "f")) == 1


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (
            "  - file: /etc/passwd\n    line: 1\n    hash: sha256:{h}\n    reason: a reason\n",
            "file",
        ),
        ("  - file: ../x\n    line: 1\n    hash: sha256:{h}\n    reason: a reason\n", "file"),
        ("  - file: a\n    line: 0\n    hash: sha256:{h}\n    reason: a reason\n", "line"),
        ("  - file: a\n    line: 1\n    hash: sk-notahash\n    reason: a reason\n", "hash"),
        ("  - file: a\n    line: 1\n    hash: sha256:{h}\n    reason: ''\n", "reason"),
        ("  - file: a\n    line: 1\n    hash: sha256:{h}\n    reason: a reason\n    x: 1\n", "x"),
    ],
)
def test_allowlist_entries_are_validated(tmp_path: Path, entry: str, field: str) -> None:
    _meta(tmp_path, entry.replace("{h}", "0" * 64))
    with pytest.raises(ScenarioError, match=rf"field 'secrets_allowlist\.0\.{field}'"):
        load_scenario(tmp_path)


def test_redact_masks_keys_in_any_message() -> None:
    key = _key()
    text = redact(f"expected 'ok', actual 'token {key}' and plainvalue99", ["plainvalue99"])
    assert key not in text
    assert "plainvalue99" not in text
    assert text.startswith("expected 'ok', actual 'token <masked 35 chars sha256:")
