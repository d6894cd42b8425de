"""``tools/upstream_harness/stage.py`` (nox -s upstream_harness): the stage is laid out where
upstream's June harness looks for its agent, config and tsconfig, the scenarios are exported
in June's spelling with their loop and depth cap in the manifest, and a missing upstream file
is refused naming it. (The harness run itself is the nox session, in CI.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "tools" / "upstream_harness" / "stage.py"
SDK = ROOT / "snapshots" / "sdk"


def _upstream_src() -> Path:
    configured = os.environ.get("DSH_UPSTREAM_SRC")
    if configured:
        return Path(configured)
    for parent in ROOT.parents:
        if (parent / "shared" / "upstream-src").is_dir():
            return parent / "shared" / "upstream-src"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("no ../shared/upstream-src (CI has it)")
    pytest.skip("no ../shared/upstream-src beside the checkout (or DSH_UPSTREAM_SRC)")


def _stage(src: Path, out: Path, *scenarios: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(STAGE), "--upstream-src", str(src), "--stage", str(out)]
    return subprocess.run(
        [*argv, *map(str, scenarios)], capture_output=True, text=True, check=False
    )


def test_the_stage_is_laid_out_as_upstreams_harness_expects(tmp_path: Path) -> None:
    out = tmp_path / "stage"
    run = _stage(_upstream_src(), out, SDK / "text-turn", SDK / "subagent-depth-limit")
    assert run.returncode == 0, run.stderr
    assert "staged 2 exported scenarios" in run.stdout
    # the harness resolves these relative to itself (snapshot-harness.ts: binScript, configPath,
    # repoTsconfig), so they sit where upstream's repository has them
    harness = out / "examples" / "acp-agent" / "tests" / "snapshot-harness.ts"
    assert "export async function runScenario" in harness.read_text()
    assert (out / "packages" / "ui" / "acp-agent" / "src" / "bin.ts").is_file()
    assert (out / "examples" / "acp-agent" / "cordis.yml").is_file()
    assert json.loads((out / "tsconfig.json").read_text())["compilerOptions"]
    assert "export function normalizeStdout" in (out / "upstream" / "normalize.ts").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(e["name"], e["loop"], e.get("maxDelegationDepth")) for e in manifest] == [
        ("sdk/text-turn", "june", None),
        ("sdk/subagent-depth-limit", "current", 2),
    ]
    exported = Path(manifest[1]["dir"])
    assert sorted(p.name for p in exported.iterdir()) == [
        "input.json",
        "session.1.jsonl",
        "session.2.jsonl",
        "session.jsonl",
        "stdout.golden.jsonl",
    ]
    header = json.loads((exported / "session.2.jsonl").read_text().splitlines()[0])
    assert header["id"] == header["parentSession"] == "{{sessionId}}"
    assert "delegationDepth" not in header  # June's headers have none
    lock = json.loads((out / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/@agentclientprotocol/sdk"]
    assert pinned["version"] == "0.28.0"
    assert pinned["integrity"].startswith("sha512-")


def test_a_missing_upstream_file_is_refused_naming_it(tmp_path: Path) -> None:
    empty = tmp_path / "upstream-src"
    empty.mkdir()
    run = _stage(empty, tmp_path / "stage", SDK / "text-turn")
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"upstream_harness: upstream's june/examples/acp-agent/tests/snapshot-harness.ts "
        f"is not in {empty}"
    )


@pytest.mark.parametrize("recorded", [False, True], ids=["not-a-scenario", "no-recording"])
def test_a_scenario_that_does_not_export_is_refused_naming_it(
    tmp_path: Path, recorded: bool
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "input.json").write_text('{"steps": [{"op": "initialize"}]}\n')
    if recorded:  # a scenario of ours, but with nothing recorded to export
        (bare / "model.script.json").write_text('{"sessions": []}\n')
        (bare / "snapshot.yml").write_text("version: 1\nprofile: sdk\nrecording: scripted\n")
    run = _stage(_upstream_src(), tmp_path / "stage", bare)
    assert run.returncode == 2, run.stderr
    reason = f"{bare} did not export: dsh-snapshot export: " if recorded else f"{bare}/"
    assert run.stderr.startswith(f"upstream_harness: {reason}")
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "stage" / "manifest.json").exists()
