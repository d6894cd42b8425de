"""Stage upstream's June ACP snapshot harness around our agent, and export our scenarios to it.

``nox -s upstream_harness`` runs this in its environment, then ``npm ci`` and ``run.ts`` in the
stage. The stage is laid out as upstream's repository is where its harness looks (the harness
finds its agent, config and tsconfig by paths relative to itself):

- ``examples/acp-agent/tests/snapshot-harness.ts``: upstream's June harness, copied from
  ``upstream-src/june`` (read at run time, never committed here);
- ``upstream/normalize.ts``: upstream's head snapshot normalizers, copied the same way;
- ``packages/ui/acp-agent/src/bin.ts``: our shim (``shim/bin.ts``), which boots
  ``dsh-acp-agent`` where the harness boots upstream's agent;
- ``examples/acp-agent/cordis.yml`` and ``tsconfig.json``: the files the harness names (our
  agent reads neither);
- ``scenarios/<profile>/<name>``: ``dsh-snapshot export --upstream june`` of every committed
  scenario that runs our agent, and ``manifest.json`` listing them with their loop and depth cap.

Usage: ``python tools/upstream_harness/stage.py --upstream-src DIR --stage DIR [SCENARIO...]``
(default: every folder under ``snapshots/`` whose ``snapshot.yml`` names no foreign agent).
Exit status 0, or 2 naming the missing upstream file or the scenario that did not export.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from dsh_core import DshError
from dsh_snapshot import load_scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Upstream files the stage needs, by their path under upstream-src, and where they go.
UPSTREAM_FILES = {
    "june/examples/acp-agent/tests/snapshot-harness.ts": (
        "examples/acp-agent/tests/snapshot-harness.ts"
    ),
    "head/packages/test-support/acp-snapshot/src/normalize.ts": "upstream/normalize.ts",
}
TSCONFIG = {
    "compilerOptions": {
        "target": "es2022",
        "module": "esnext",
        "moduleResolution": "bundler",
        "allowImportingTsExtensions": True,
        "strict": True,
        "noEmit": True,
    }
}


def _scenarios(given: list[Path]) -> list[Path]:
    if given:
        return given
    found = sorted(p.parent for p in (ROOT / "snapshots").glob("*/*/input.json"))
    return [p for p in found if (meta := load_scenario(p).meta) is None or meta.agent is None]


def stage(upstream_src: Path, out: Path, scenarios: list[Path]) -> list[str]:
    """Lay out the stage; returns one line per upstream file copied (its sha256)."""
    copied: list[str] = []
    for source, target in UPSTREAM_FILES.items():
        path = upstream_src / source
        if not path.is_file():
            raise FileNotFoundError(f"upstream's {source} is not in {upstream_src}")
        (out / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / target)
        copied.append(f"{source} sha256:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}")
    for name in ("package.json", "package-lock.json", "run.ts"):
        shutil.copyfile(HERE / name, out / name)
    shim = out / "packages" / "ui" / "acp-agent" / "src" / "bin.ts"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "shim" / "bin.ts", shim)
    (out / "examples" / "acp-agent" / "cordis.yml").write_text(
        "# upstream's agent config; dsh-py's agent (the shim) reads none\n", encoding="utf-8"
    )
    (out / "tsconfig.json").write_text(json.dumps(TSCONFIG, indent=2) + "\n", encoding="utf-8")
    exported = out / "scenarios"
    shutil.rmtree(exported, ignore_errors=True)
    dsh_snapshot = Path(sys.executable).parent / "dsh-snapshot"
    manifest: list[dict[str, object]] = []
    for folder in scenarios:
        scenario = load_scenario(folder)
        target = exported / scenario.name
        run = subprocess.run(
            [str(dsh_snapshot), "export", "--upstream", "june", str(folder), str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise RuntimeError(f"{folder} did not export: {run.stderr.strip()}")
        entry: dict[str, object] = {"name": scenario.name, "dir": str(target)}
        entry["loop"] = scenario.loop
        if scenario.meta is not None and scenario.meta.max_delegation_depth is not None:
            entry["maxDelegationDepth"] = scenario.meta.max_delegation_depth
        manifest.append(entry)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--upstream-src", type=Path, required=True)
    parser.add_argument("--stage", type=Path, required=True)
    parser.add_argument("scenarios", type=Path, nargs="*")
    args = parser.parse_args(argv)
    try:
        args.stage.mkdir(parents=True, exist_ok=True)
        copied = stage(args.upstream_src, args.stage, _scenarios(args.scenarios))
    except (OSError, RuntimeError, DshError) as exc:
        print(f"upstream_harness: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    for line in copied:
        print(f"upstream: {line}")
    count = len(json.loads((args.stage / "manifest.json").read_text(encoding="utf-8")))
    print(f"staged {count} exported scenarios in {args.stage}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
