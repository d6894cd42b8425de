"""``lazy_exports``: names imported on first use, and deprecated aliases that warn."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_core import Deprecated, lazy_exports


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package ``lazypkg`` whose ``_heavy`` module records that it was imported."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        textwrap.dedent(
            """
            from dsh_core import Deprecated, lazy_exports

            __all__ = ["Heavy", "helper"]
            __getattr__, __dir__ = lazy_exports(
                __name__,
                {"Heavy": "._heavy", "helper": "._heavy"},
                deprecated={"OldHeavy": Deprecated("._heavy", "Heavy", "9.9")},
            )
            """
        ),
        encoding="utf-8",
    )
    (root / "_heavy.py").write_text(
        "class Heavy: ...\n\ndef helper() -> int:\n    return 7\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # pyright: ignore[reportUnknownMemberType]
    yield "lazypkg"
    for name in [n for n in sys.modules if n.startswith("lazypkg")]:
        del sys.modules[name]


def test_a_name_is_imported_on_first_use_then_kept(package: str) -> None:
    module = __import__(package)
    assert f"{package}._heavy" not in sys.modules
    assert module.helper() == 7
    assert f"{package}._heavy" in sys.modules
    assert "helper" in vars(module)  # the next lookup is a plain attribute
    assert {"Heavy", "helper"} <= set(dir(module))


def test_an_unknown_name_is_an_attribute_error(package: str) -> None:
    module = __import__(package)
    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'nothing'"):
        _ = module.nothing


def test_a_deprecated_alias_warns_on_every_use(package: str) -> None:
    module = __import__(package)
    for _ in range(2):
        with pytest.warns(
            DeprecationWarning,
            match=r"lazypkg\.OldHeavy is deprecated, use lazypkg\.Heavy \(removal in 9\.9\)",
        ):
            assert module.OldHeavy is module.Heavy
    assert "OldHeavy" not in vars(module)


def test_absolute_homes_work_too() -> None:
    getattr_, _ = lazy_exports("dsh_core", {"ScenarioFiles": "dsh_core._scenario_files"})
    assert getattr_("ScenarioFiles").__name__ == "ScenarioFiles"
    assert Deprecated("x", "y", "0.3.0").removal == "0.3.0"
