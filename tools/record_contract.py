"""``nox -s snapshot_record`` end to end without a key: against the strict contract server.

Copies ``snapshots/`` into a temporary folder, serves every scenario's own model script through
one strict :class:`ScriptedModelServer` (today's API contract: ``GET /models``, a bearer key,
real 400s) on 127.0.0.1, and runs the real nox sessions a team with a key runs, pointed at it
with a fake key built here:

1. ``nox -s snapshot_record -- COPY`` must record every scenario and mark it ``live``;
2. ``nox -s snapshot -- COPY`` must replay the new fixtures green;
3. ``nox -s snapshot_refresh -- COPY`` must leave every byte of them as it was.

The committed fixtures are only read. Exit status 0 when all three hold, 1 otherwise.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER
from dsh_scripted_server import ScriptedModelServer, ScriptLibrary, resolve_profile

ROOT = Path(__file__).resolve().parent.parent


def _nox(*args: str, env: dict[str, str]) -> None:
    """Run a nox session through the same bootstrap CI uses; a failure ends the check."""
    command = [sys.executable, str(ROOT / "tools" / "bootstrap.py"), *args]
    print("$ nox", " ".join(args), flush=True)
    subprocess.run(command, cwd=ROOT, env=env, check=True)


class OutsideLinkError(Exception):
    """The scenario tree holds a link that leads out of it."""


def copy_scenario_tree(source: Path, target: Path) -> None:
    """Copy a scenario tree with its links kept as links, refusing one that leads out of it.

    ``copytree``'s default copies what a link points at, so a pull request's
    ``workspace -> ~/.ssh`` became real files in the copy, past every later link check.

    Raises:
        OutsideLinkError: naming the link in ``source`` and where it points.
    """
    shutil.copytree(source, target, symlinks=True)
    inside = target.resolve()
    for link in sorted(p for p in target.rglob("*") if p.is_symlink()):
        if not link.resolve().is_relative_to(inside):
            where = source / link.relative_to(target)
            raise OutsideLinkError(
                f"{where}: a link out of the scenario tree (to {os.readlink(link)}); "
                "the contract check never follows it"
            )


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _not_live(copy: Path) -> list[str]:
    """Scenarios recorded from a script whose ``snapshot.yml`` does not now say ``live``."""
    wrong: list[str] = []
    for meta_file in sorted(copy.rglob("snapshot.yml")):
        meta = yaml.safe_load(meta_file.read_text(encoding="utf-8"))
        if meta.get("recording") != "authored" and meta.get("recording") != "live":
            wrong.append(str(meta_file.parent.relative_to(copy)))
    return wrong


def main() -> int:
    """Record, replay and refresh a copy of ``snapshots/`` against the contract server."""
    work = Path(tempfile.mkdtemp(prefix="dsh-record-contract-"))
    try:
        copy = work / "snapshots"
        try:
            copy_scenario_tree(ROOT / "snapshots", copy)
        except OutsideLinkError as exc:
            print(f"record-contract: {exc}", file=sys.stderr)
            return 1
        key = "sk-" + secrets.token_hex(16)  # fake, and only ever in this process's children
        library = ScriptLibrary.from_folder(copy)
        # The provider a record run uses by default, played by the server: its variables come
        # from its settings model, whatever its prefix.
        profile = resolve_profile(DEFAULT_MODEL_PROVIDER)
        prefix = profile.env_name("")
        base = {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", prefix))}
        with ScriptedModelServer(
            api_key=key, router=library.route, strict=True, profile=profile
        ) as server:
            live = {**base, **server.client_env(), profile.env_name("retry_base_wait"): "0"}
            _nox("-s", "snapshot_record", "--", str(copy), env=live)
        if wrong := _not_live(copy):
            print(f"record-contract: not recorded live: {', '.join(wrong)}", file=sys.stderr)
            return 1
        _nox("-s", "snapshot", "--", str(copy), env=base)
        recorded = _tree(copy)
        _nox("-s", "snapshot_refresh", "--", str(copy), env=base)
        changed = [name for name, data in _tree(copy).items() if recorded.get(name) != data]
        if changed:
            print(f"record-contract: refresh changed {', '.join(changed)}", file=sys.stderr)
            return 1
        count = len(list(copy.rglob("input.json")))
        print(f"record-contract: {count} scenarios recorded live, replayed green, refresh stable")
        return 0
    except subprocess.CalledProcessError as exc:
        print(f"record-contract: {' '.join(map(str, exc.cmd[1:]))} failed", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
