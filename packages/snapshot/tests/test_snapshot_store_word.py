"""One concept, one word: "store". The Python names it replaced are deprecated aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_snapshot import ScenarioResult, SnapshotSettings, load_scenario
from dsh_snapshot.testing import Sandbox


def test_settings_take_the_old_field_name_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"persistences=…\) is deprecated, use stores="):
        settings = SnapshotSettings(persistences=("sqlite",))  # pyright: ignore[reportCallIssue]
    assert settings.stores == ("sqlite",)
    with pytest.warns(DeprecationWarning, match=r"SnapshotSettings\.persistences is deprecated"):
        assert settings.persistences == ("sqlite",)


def test_the_new_field_wins_over_the_old() -> None:
    with pytest.warns(DeprecationWarning, match="persistences"):
        settings = SnapshotSettings.model_validate(
            {"stores": ("jsonl",), "persistences": ("sqlite",)}
        )
    assert settings.stores == ("jsonl",)


def test_a_result_names_its_store_and_the_old_name_warns(tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path)
    scenario = load_scenario(box.scenario("x"))
    result = ScenarioResult(scenario, SnapshotSettings(stores=("jsonl",)), "sqlite")
    assert result.store == "sqlite"
    with pytest.warns(DeprecationWarning, match=r"ScenarioResult\.persistence is deprecated"):
        assert result.persistence == "sqlite"
