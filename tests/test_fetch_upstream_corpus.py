"""``tools/fetch_upstream_corpus.py`` against a real git repository made here (the machine has
no route to upstream): a blobless fetch at a pinned commit that is not the tip, a sparse
checkout of the scenario folders found by name, only the kept files, the content hash checked
before anything is installed, and the cache used without git once it verifies.

The expected hashes are computed here from the files the test wrote, independently of the
tool's own digest function."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from dsh_core.testing import corpus_unavailable, upstream_corpus

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "fetch_upstream_corpus.py"

# Upstream-shaped scenario folders: what the corpus keeps, plus what it drops.
KEPT = {
    "text-turn/input.json": '{"steps":[]}\n',
    "text-turn/session.jsonl": '{"type":"session","version":0,"id":"a","createdAt":1}\n',
    "text-turn/stdout.golden.jsonl": "{}\n",
    "fork/input.json": '{"steps":[{"op":"initialize"}]}\n',
    "fork/session.jsonl": '{"type":"session","version":0,"id":"b","createdAt":2}\n',
    "fork/session.1.jsonl": '{"type":"session","version":0,"id":"c","createdAt":3}\n',
    "fork/replay.override.json": "[]\n",
    "fork/workspace/notes/a.txt": "seeded\n",
}
DROPPED = {
    "text-turn/README.md": "not kept\n",
    "fork/cordis.snapshot.yml": "not kept\n",
}


@pytest.fixture
def tool(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_upstream_corpus", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _git(*args: str | Path, cwd: Path) -> str:
    return subprocess.run(
        ["git", *map(str, args)], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def _digest(files: dict[str, str]) -> str:
    """The documented content hash, computed from the test's own data."""
    lines = "".join(
        f"{path}\0{hashlib.sha256(text.encode()).hexdigest()}\n"
        for path, text in sorted(files.items())
    )
    return hashlib.sha256(lines.encode()).hexdigest()


@pytest.fixture
def upstream(tmp_path: Path) -> tuple[Path, str]:
    """A repository with the fixtures under a nested folder at one commit, and a later
    commit that changes a kept file (so only the pinned commit verifies)."""
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git("init", "--quiet", "--initial-branch=main", cwd=repo)
    _git("config", "user.email", "t@example.invalid", cwd=repo)
    _git("config", "user.name", "t", cwd=repo)
    _git("config", "uploadpack.allowFilter", "true", cwd=repo)
    _git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=repo)
    for relative, text in {**KEPT, **DROPPED, "src/other.ts": "x\n"}.items():
        path = repo / "examples" / "tests" / "snapshots" / relative
        if relative.startswith("src/"):
            path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git("add", "-A", cwd=repo)
    _git("commit", "--quiet", "-m", "fixtures", cwd=repo)
    pinned = _git("rev-parse", "HEAD", cwd=repo).strip()
    (repo / "examples/tests/snapshots/text-turn/stdout.golden.jsonl").write_text("changed\n")
    _git("commit", "--quiet", "-am", "later", cwd=repo)
    return repo, pinned


def _manifest(path: Path, commit: str, sha256: str, scenarios: list[str] | None = None) -> Path:
    path.write_text(
        json.dumps(
            {
                "eras": {
                    "june": {
                        "commit": commit,
                        "ref": "main",
                        "scenarios": scenarios or ["fork", "text-turn"],
                        "sha256": sha256,
                    }
                }
            }
        )
    )
    return path


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }


def test_fetches_the_pinned_commit_verified_then_serves_the_cache(
    upstream: tuple[Path, str], tmp_path: Path
) -> None:
    repo, pinned = upstream
    manifest = _manifest(tmp_path / "m.json", pinned[:10], _digest(KEPT))
    cache = tmp_path / "cache"
    done = _run("--repo", repo.as_uri(), "--cache", cache, "--manifest", manifest)
    assert done.returncode == 0, done.stderr
    assert f"june: fetched {pinned[:10]}, verified" in done.stdout
    assert _files(cache / "june") == KEPT  # the pinned commit's kept files, nothing else
    assert [p.name for p in cache.iterdir()] == ["june"]  # no work folder left behind
    # verified cache: no git needed (an unreachable repository is never contacted)
    again = _run("--repo", tmp_path / "gone", "--cache", cache, "--manifest", manifest)
    assert again.returncode == 0, again.stderr
    assert "june: cached, verified" in again.stdout


def test_a_tampered_cache_is_fetched_again(upstream: tuple[Path, str], tmp_path: Path) -> None:
    repo, pinned = upstream
    manifest = _manifest(tmp_path / "m.json", pinned, _digest(KEPT))
    cache = tmp_path / "cache"
    assert _run("--repo", repo, "--cache", cache, "--manifest", manifest).returncode == 0
    (cache / "june" / "fork" / "session.jsonl").write_text("tampered\n")
    (cache / "june" / "extra.txt").write_text("added\n")
    done = _run("--repo", repo, "--cache", cache, "--manifest", manifest)
    assert done.returncode == 0, done.stderr
    assert "june: fetched" in done.stdout
    assert _files(cache / "june") == KEPT


def test_content_that_does_not_verify_is_not_installed(
    upstream: tuple[Path, str], tmp_path: Path
) -> None:
    repo, _ = upstream
    tip = _git("rev-parse", "HEAD", cwd=repo).strip()  # the later commit: other content
    manifest = _manifest(tmp_path / "m.json", tip, _digest(KEPT))
    cache = tmp_path / "cache"
    done = _run("--repo", repo, "--cache", cache, "--manifest", manifest)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert f"era june at {tip}: content hash" in line
    assert "nothing was installed" in line
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize(
    ("commit", "scenarios", "needle"),
    [
        ("0123456789", None, "commit 0123456789 is not on main"),
        (None, ["fork", "text-turn", "missing"], "has no scenario folder named missing"),
    ],
    ids=["unknown-commit", "missing-scenario"],
)
def test_git_and_layout_failures_exit_2_naming_what(
    upstream: tuple[Path, str],
    tmp_path: Path,
    commit: str | None,
    scenarios: list[str] | None,
    needle: str,
) -> None:
    repo, pinned = upstream
    manifest = _manifest(tmp_path / "m.json", commit or pinned, _digest(KEPT), scenarios)
    done = _run("--repo", repo, "--cache", tmp_path / "cache", "--manifest", manifest)
    assert done.returncode == 2
    assert needle in done.stderr
    assert not (tmp_path / "cache" / "june").exists()


def test_without_a_repository_and_no_cache_it_says_what_to_give(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path / "m.json", "0123456789", "0" * 64)
    done = _run("--cache", tmp_path / "cache", "--manifest", manifest, "--repo", "")
    assert done.returncode == 2
    assert "give upstream's repository with --repo or DSH_UPSTREAM_REPO" in done.stderr


def test_the_committed_pins_match_the_shared_corpus(tool: ModuleType) -> None:
    corpus = upstream_corpus(__file__)
    if corpus is None:
        corpus_unavailable("no upstream corpus to check the pins against")
    for era in tool.load_manifest():
        assert tool.tree_digest(corpus / era.name) == era.sha256, era.name
        assert sorted(p.name for p in (corpus / era.name).iterdir()) == list(era.scenarios)


def test_the_cache_is_where_tests_look_without_a_shared_corpus(
    tool: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_UPSTREAM_CORPUS", raising=False)
    monkeypatch.setenv("DSH_UPSTREAM_CACHE", str(tmp_path / "cache"))
    assert upstream_corpus(tmp_path / "clone" / "tests") is None
    (tmp_path / "cache" / "june").mkdir(parents=True)
    assert upstream_corpus(tmp_path / "clone" / "tests") == tmp_path / "cache"
    assert tool.corpus_cache() == tmp_path / "cache"  # the tool fills that same folder


def test_a_missing_corpus_skips_locally_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="fetch_upstream_corpus"):
        corpus_unavailable("no corpus")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        corpus_unavailable("no corpus")
