"""The scenario root a user names may itself be a link the checkout planted (red team F15):
``snapshots -> ../other/snapshots`` made ``refresh`` rewrite another tree's fixtures, and
``snapshots -> /`` walked the whole disk. Every front end refuses it, naming the link."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_snapshot import ScenarioError
from dsh_snapshot._discover import scenario_root
from dsh_snapshot.testing import tree_state

_BIN = Path(sys.executable).parent


@pytest.fixture
def linked_checkout(tmp_path: Path, scenario_copy: Callable[[str], Path]) -> Path:
    """``checkout/snapshots`` is a link to another project's scenario tree."""
    other = scenario_copy("text-turn").parent.parent  # tmp_path, holding sdk/text-turn
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "snapshots").symlink_to(other)
    return checkout


@pytest.mark.parametrize("mode", ["replay", "refresh"])
def test_the_cli_refuses_a_linked_root_and_writes_nothing(linked_checkout: Path, mode: str) -> None:
    target = (linked_checkout / "snapshots").resolve()
    before = tree_state(target / "sdk")
    run = subprocess.run(
        [str(_BIN / "dsh-snapshot"), mode, "snapshots"],
        cwd=linked_checkout,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    said = " ".join((run.stdout + run.stderr).split())  # the console wraps long lines
    assert f"{linked_checkout / 'snapshots'}: a symbolic link (to {target})" in said
    assert "name the real folder" in said
    assert tree_state(target / "sdk") == before


def test_a_link_further_down_the_named_path_is_refused(
    linked_checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(linked_checkout)
    with pytest.raises(ScenarioError, match=r"snapshots: a symbolic link"):
        scenario_root(Path("snapshots/sdk/text-turn"))
    with pytest.raises(ScenarioError, match=r"snapshots: a symbolic link"):
        scenario_root(linked_checkout / "snapshots" / "sdk")


def test_links_above_the_working_directory_are_the_machines(
    linked_checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a checkout reached through a linked parent (macOS /tmp) is named and used as it is
    monkeypatch.chdir(linked_checkout / "snapshots" / "sdk")
    assert (
        scenario_root(Path("text-turn"))
        == (linked_checkout / "snapshots" / "sdk" / "text-turn").resolve()
    )


def test_the_pytest_plugin_refuses_a_linked_root(
    linked_checkout: Path, inner_pytest: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    run = inner_pytest(linked_checkout, "--collect-only", "-q", "--dsh-snapshots", "snapshots")
    assert run.returncode == 4, run.stdout + run.stderr
    assert "snapshots: a symbolic link" in run.stderr
