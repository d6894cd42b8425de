"""Fetch upstream's ACP snapshot folders at the pinned commits into a cache, verified.

The upstream corpus (``../shared/upstream-corpus``) exists only beside this checkout on the
project's own machines; a user's clone has none, and the tests that need it skip. This tool
makes the same folders for anyone with git and access to upstream's repository:

1. a blobless fetch (``--filter=blob:none``) of the pinned ref, then the pinned commit
   resolved in it (an abbreviated id is enough);
2. the scenario folders found in that commit's tree by name (a folder holding ``input.json``
   whose name the manifest lists), and a sparse checkout of just those;
3. only the files the corpus keeps (``input.json``, ``session*.jsonl``, the stdout fixture,
   ``replay.override.json``, ``workspace/``) copied to a staging folder whose content hash
   (:func:`tree_digest`) must equal the manifest's, or nothing is installed;
4. the staging folder renamed into the cache (``<cache>/<era>``), replacing an older one.

A cached era whose hash still matches is used as it is, without git.

The pins live in ``tools/upstream_corpus.json``: per era, the commit, the ref it is on, the
scenario names and the content hash (computed from ``../shared/upstream-corpus``). Upstream's
repository is given with ``--repo`` or ``DSH_UPSTREAM_REPO``.

Usage: ``python tools/fetch_upstream_corpus.py --repo URL [--cache DIR] [--era NAME]...``
Exit status: 0 the cache holds every asked era, verified; 1 a fetched era did not verify
(nothing installed for it); 2 bad usage, or git failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_core.testing import corpus_cache

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tools" / "upstream_corpus.json"

# What the corpus keeps of a scenario folder (upstream-corpus/NOTICE.md), besides workspace/.
_KEPT = re.compile(
    r"input\.json|session(\.\d+)?\.jsonl|stdout\.(golden|expected)\.jsonl|replay\.override\.json"
)


class FetchError(Exception):
    """git failed, or the pinned commit or a scenario is not where the manifest says."""


class VerificationError(Exception):
    """The fetched files do not hash to the pinned content hash."""


@dataclass(frozen=True)
class Era:
    """One pinned fixture set (``june``, ``head``…)."""

    name: str
    commit: str
    ref: str
    scenarios: tuple[str, ...]
    sha256: str


def load_manifest(path: Path = MANIFEST) -> list[Era]:
    """The eras pinned in ``path``.

    Raises:
        ValueError: naming the file and the field that is missing or malformed.
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    eras: list[Era] = []
    for name, entry in sorted(document.get("eras", {}).items()):
        try:
            era = Era(
                name,
                str(entry["commit"]),
                str(entry.get("ref", "HEAD")),
                tuple(str(s) for s in entry["scenarios"]),
                str(entry["sha256"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: era {name!r} lacks field {exc}") from None
        if not re.fullmatch(r"[0-9a-f]{7,40}", era.commit) or not re.fullmatch(
            r"[0-9a-f]{64}", era.sha256
        ):
            raise ValueError(f"{path}: era {name!r} needs a hex commit and a sha256 hex digest")
        eras.append(era)
    if not eras:
        raise ValueError(f"{path}: no eras pinned")
    return eras


def is_kept(relative: str) -> bool:
    """Whether a path inside a scenario folder is a file the corpus keeps."""
    parts = relative.split("/")
    return parts[0] == "workspace" or (len(parts) == 1 and _KEPT.fullmatch(parts[0]) is not None)


def tree_digest(folder: Path) -> str:
    """The content hash of an era folder: SHA-256 over ``<path>\\0<sha256 of bytes>\\n`` of
    every file, by relative POSIX path, so renames, additions and edits all change it."""
    digest = hashlib.sha256()
    files = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file())
    for relative, path in files:
        digest.update(f"{relative}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def _git(*args: str | Path, cwd: Path | None = None) -> str:
    command = ["git", *map(str, args)]
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, check=False, timeout=900
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FetchError(f"{' '.join(command)}: {exc}") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise FetchError(f"{' '.join(command)}: {detail}")
    return done.stdout


def _scenario_folders(repo: Path, commit: str, era: Era) -> dict[str, str]:
    """Each scenario's folder in ``commit``'s tree (found by name, holding ``input.json``)."""
    found: dict[str, list[str]] = {}
    wanted = set(era.scenarios)
    for line in _git("ls-tree", "-r", "--name-only", commit, cwd=repo).splitlines():
        if line.endswith("/input.json"):
            folder = line[: -len("/input.json")]
            name = folder.rsplit("/", 1)[-1]
            if name in wanted:
                found.setdefault(name, []).append(folder)
    missing = sorted(wanted - found.keys())
    if missing:
        raise FetchError(
            f"era {era.name}: commit {era.commit} has no scenario folder named {', '.join(missing)}"
        )
    ambiguous = {name: paths for name, paths in found.items() if len(paths) > 1}
    if ambiguous:
        name, paths = sorted(ambiguous.items())[0]
        raise FetchError(f"era {era.name}: scenario {name} is in several folders: {paths}")
    return {name: paths[0] for name, paths in found.items()}


def fetch_era(repository: str, era: Era, cache: Path) -> Path:
    """Fetch, verify and install one era into ``cache``; return its folder.

    Raises:
        FetchError: git failed, or the commit or a scenario was not found.
        VerificationError: the files do not hash to ``era.sha256``; nothing is installed.
    """
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{era.name}-", dir=cache) as work_name:
        work = Path(work_name)
        repo = work / "repo"
        _git("init", "--quiet", repo)
        _git("remote", "add", "origin", repository, cwd=repo)
        _git("fetch", "--quiet", "--filter=blob:none", "--no-tags", "origin", era.ref, cwd=repo)
        try:
            commit = _git("rev-parse", "--verify", f"{era.commit}^{{commit}}", cwd=repo).strip()
        except FetchError:
            raise FetchError(
                f"era {era.name}: commit {era.commit} is not on {era.ref} of {repository}"
            ) from None
        folders = _scenario_folders(repo, commit, era)
        _git("sparse-checkout", "set", "--no-cone", *(f"/{f}/" for f in folders.values()), cwd=repo)
        _git("checkout", "--quiet", commit, cwd=repo)
        staging = work / era.name
        for name, folder in folders.items():
            source = repo / folder
            for path in sorted(source.rglob("*")):
                relative = path.relative_to(source).as_posix()
                if path.is_file() and not path.is_symlink() and is_kept(relative):
                    target = staging / name / relative
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target)
        actual = tree_digest(staging)
        if actual != era.sha256:
            raise VerificationError(
                f"era {era.name} at {commit}: content hash {actual} is not the pinned "
                f"{era.sha256}; nothing was installed"
            )
        final = cache / era.name
        if final.exists():
            old = work / "old"
            final.rename(old)
        staging.rename(final)
    return final


def ensure(repository: str | None, eras: Sequence[Era], cache: Path) -> list[str]:
    """Every era in ``cache``, fetched unless already there and verified; one line each."""
    lines: list[str] = []
    for era in eras:
        folder = cache / era.name
        if folder.is_dir() and tree_digest(folder) == era.sha256:
            lines.append(f"{era.name}: cached, verified ({folder})")
            continue
        if not repository:
            raise FetchError(
                f"era {era.name} is not in {cache} (or does not verify): give upstream's "
                f"repository with --repo or DSH_UPSTREAM_REPO"
            )
        fetch_era(repository, era, cache)
        lines.append(f"{era.name}: fetched {era.commit}, verified ({folder})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; return its exit status."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repo", default=os.environ.get("DSH_UPSTREAM_REPO"), help="upstream")
    parser.add_argument("--cache", type=Path, default=None, help="default: DSH_UPSTREAM_CACHE")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help=argparse.SUPPRESS)
    parser.add_argument("--era", action="append", default=None, help="only these eras")
    args = parser.parse_args(argv)
    try:
        eras = load_manifest(args.manifest)
        if args.era:
            unknown = sorted(set(args.era) - {era.name for era in eras})
            if unknown:
                raise ValueError(f"unknown era {', '.join(unknown)}")
            eras = [era for era in eras if era.name in args.era]
        cache: Path = args.cache or corpus_cache()
        for line in ensure(args.repo, eras, cache):
            print(line)
    except VerificationError as exc:
        print(f"fetch_upstream_corpus: {exc}", file=sys.stderr)
        return 1
    except (FetchError, ValueError, OSError) as exc:
        print(f"fetch_upstream_corpus: {exc}", file=sys.stderr)
        return 2
    print(cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
