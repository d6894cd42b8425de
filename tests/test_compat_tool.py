"""``tools/compat.py`` (nox -s compat) is a table over the snapshot engine: it loads and
describes the upstream recordings itself, and every replay is one ``dsh_snapshot.run``."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dsh_core.plugins import default_store_backend_names
from dsh_core.testing import corpus_unavailable, upstream_corpus
from dsh_snapshot import ScenarioResult, SnapshotSettings, run

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def compat(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``tools/compat.py`` imported as a module (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("compat_tool", ROOT / "tools" / "compat.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look themselves up
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Two June recordings and one head recording of the upstream corpus, in a temporary
    corpus folder (read from ../shared, never copied into the repository)."""
    found = upstream_corpus(__file__)
    if found is None or not (found / "june").is_dir():
        corpus_unavailable("no upstream corpus (../shared/upstream-corpus or DSH_UPSTREAM_CORPUS)")
    for era, name in (("june", "text-turn"), ("june", "handshake")):
        shutil.copytree(found / era / name, tmp_path / era / name, symlinks=True)
    head = sorted(p for p in (found / "head").iterdir() if (p / "session.jsonl").is_file())
    shutil.copytree(head[0], tmp_path / "head" / head[0].name, symlinks=True)
    return tmp_path


def test_compat_replays_through_the_engine_and_prints_its_table(
    compat: ModuleType,
    corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[tuple[SnapshotSettings, list[str]]] = []

    def spy(
        settings: SnapshotSettings, scenarios: Sequence[Any] | None = None
    ) -> list[ScenarioResult]:
        calls.append((settings, [s.name for s in scenarios or ()]))
        return run(settings, scenarios)

    monkeypatch.setattr(compat, "run", spy)
    status = compat.main(["--corpus", str(corpus), "--jobs", "2", "--no-scripts"])
    out = capsys.readouterr().out
    assert status == 0, out
    june, head = calls[0], calls[-1]
    assert june[1] == ["june/handshake", "june/text-turn"]
    assert sorted(june[0].stores) == sorted(default_store_backend_names())  # the default set
    assert june[0].allowances is not None
    assert june[0].allowances.any
    assert (june[0].jobs, june[0].mode) == (2, "replay")
    assert head[0].check == "messages"
    assert head[0].stores == ("jsonl",)
    assert f"reproduced ({', '.join(june[0].stores)})" in out
    assert "june: 2 scenarios: 2 replayed (2 identical)" in out


def test_compat_without_a_corpus_skips_saying_so(
    compat: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert compat.main(["--corpus", str(tmp_path / "none")]) == 0
    assert "compat: skipped: no upstream corpus" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")  # CI has the corpus: a missing one fails the run
    assert compat.main(["--corpus", str(tmp_path / "none")]) == 1
    assert "compat: failed: no upstream corpus" in capsys.readouterr().out
