"""CLI paths that need no agent run: list, usage errors, and a proof with nothing to prove."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_snapshot.cli import main


def _scenario(folder: Path, children: tuple[int, ...] = ()) -> Path:
    folder.mkdir(parents=True)
    (folder / "input.json").write_text(json.dumps({"steps": [{"op": "initialize"}]}))
    (folder / "snapshot.yml").write_text(
        "version: 1\nprofile: sdk\nstore: default\nrecording: scripted\n"
    )
    header = {"type": "session", "version": 0, "id": "{{sessionId}}", "createdAt": 0}
    (folder / "session.jsonl").write_text(json.dumps(header) + "\n")
    for n, seed in enumerate(children, 1):
        child = {**header, "parentSession": "{{sessionId}}"} | (
            {"seedLength": seed} if seed else {}
        )
        (folder / f"session.{n}.jsonl").write_text(json.dumps(child) + "\n")
    return folder


def test_list_shows_recording_sessions_and_fork(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _scenario(tmp_path / "sdk" / "spawn", children=(0,))
    _scenario(tmp_path / "sdk" / "fork", children=(0, 23))
    assert main(["list", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "sdk/" in line]
    assert "sdk/fork" in rows[0]
    assert "yes" in rows[0]
    assert "sdk/spawn" in rows[1]
    assert "yes" not in rows[1]
    assert out.rstrip().endswith("2 scenarios")


def test_malformed_scenario_is_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _scenario(tmp_path / "sdk" / "bad")
    (folder / "snapshot.yml").write_text("version: 1\nprofile: sdk\nrecording: maybe\n")
    assert main(["replay", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "snapshot.yml" in out
    assert "'recording'" in out


def test_unknown_store_backend_is_exit_2_listing_the_installed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _scenario(tmp_path / "sdk" / "x")
    with pytest.raises(SystemExit) as stopped:
        main(["replay", str(tmp_path), "--store", "no-such-store"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "unknown store backend no-such-store; choose from " in error
    assert "jsonl" in error
    assert "sqlite" in error


@pytest.mark.parametrize("option", ["--persistence", "--composition"])
def test_the_old_option_names_still_work_and_say_they_are_deprecated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    _scenario(tmp_path / "sdk" / "x")
    main(["replay", str(tmp_path), option, "sqlite", "--jobs", "1"])
    captured = capsys.readouterr()
    assert f"{option} is deprecated (removal in 0.3.0), use --store" in captured.err
    assert "1 scenarios (1 runs)" in captured.out  # the one backend it named, not every one


def test_no_scenarios_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path)]) == 1
    assert "no scenarios (folders holding input.json)" in capsys.readouterr().out


def test_proof_without_fork_scenarios_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _scenario(tmp_path / "sdk" / "spawn", children=(0,))
    assert main(["proof", str(tmp_path)]) == 1
    assert "no fork scenario" in capsys.readouterr().out


def test_record_with_an_unknown_provider_is_exit_2_listing_the_installed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _scenario(tmp_path / "sdk" / "x")
    monkeypatch.setenv("DSH_RECORD_PROVIDER", "gpt")
    monkeypatch.chdir(tmp_path)  # no ./.env of the checkout
    assert main(["record", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "dsh-snapshot record: unknown model provider 'gpt': choose one of " in error
    assert "deepseek" in error
