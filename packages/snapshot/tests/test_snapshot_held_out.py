"""The held-out June recording reject-extra-dirs, rebuilt from what June's ACP bridge does
(``packages/ui/acp``: ``validateWorkspaceParams`` before ``agents.create``, the text "…is not
supported in this MVP") and laid out as upstream's June harness keeps it: a bare-header
``session.jsonl`` (the zero id, ``createdAt`` 0) for a scenario where no session exists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_snapshot import SnapshotSettings, load_scenario, run_scenario

_CAPABILITIES = {
    "loadSession": True,
    "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
}


def _june_folder(root: Path, message: str) -> Path:
    folder = root / "reject-extra-dirs"
    folder.mkdir()
    steps = [
        {"op": "initialize"},
        {"op": "newSessionExpectError", "additionalDirectories": ["/extra-dir"]},
    ]
    (folder / "input.json").write_text(json.dumps({"steps": steps}))
    frames: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 1, "result": {
            "protocolVersion": 1,
            "agentInfo": {"name": "deepseek-harness-acp", "version": "0.0.1"},
            "agentCapabilities": _CAPABILITIES,
            "authMethods": [],
        }},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": message}},
    ]  # fmt: skip
    (folder / "stdout.golden.jsonl").write_text("".join(json.dumps(f) + "\n" for f in frames))
    header = {"type": "session", "version": 0, "id": "00000000-0000-0000-0000-000000000000",
              "createdAt": 0}  # fmt: skip
    (folder / "session.jsonl").write_text(json.dumps(header) + "\n")
    return folder


def test_june_reject_extra_dirs_reproduces(tmp_path: Path) -> None:
    folder = _june_folder(
        tmp_path, "Invalid params: additionalDirectories is not supported in this MVP"
    )
    scenario = load_scenario(folder)
    assert scenario.loop == "june"
    result = run_scenario(scenario, SnapshotSettings(stores=("jsonl",)))
    assert result.ok, result.failures


@pytest.mark.parametrize(
    "message",
    ["Invalid params: additionalDirectories is not supported", "Invalid params: other"],
)
def test_another_text_does_not_pass_for_june(tmp_path: Path, message: str) -> None:
    result = run_scenario(
        load_scenario(_june_folder(tmp_path, message)), SnapshotSettings(stores=("jsonl",))
    )
    assert not result.ok
    assert any("error.message" in failure for failure in result.failures), result.failures
