"""``DSH_STORE`` names the store; ``DSH_PERSISTENCE``, its old name, is a deprecated alias."""

from __future__ import annotations

import pytest

from dsh_acp_agent._settings import SettingsError, load_settings


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("DSH_STORE", raising=False)
    monkeypatch.delenv("DSH_PERSISTENCE", raising=False)
    return monkeypatch


def test_dsh_store_names_the_store(clean: pytest.MonkeyPatch) -> None:
    clean.setenv("DSH_STORE", "sqlite")
    assert load_settings().store == "sqlite"


def test_the_old_name_still_works_and_warns(clean: pytest.MonkeyPatch) -> None:
    clean.setenv("DSH_PERSISTENCE", "sqlite")
    with pytest.warns(DeprecationWarning, match=r"DSH_PERSISTENCE is deprecated, use DSH_STORE"):
        assert load_settings().store == "sqlite"


def test_the_new_name_wins_over_the_old(clean: pytest.MonkeyPatch) -> None:
    clean.setenv("DSH_STORE", "jsonl")
    clean.setenv("DSH_PERSISTENCE", "sqlite")
    assert load_settings().store == "jsonl"


def test_an_unknown_store_under_the_old_name_is_refused_naming_the_setting(
    clean: pytest.MonkeyPatch,
) -> None:
    clean.setenv("DSH_PERSISTENCE", "xml")
    with (
        pytest.warns(DeprecationWarning, match="DSH_PERSISTENCE"),
        pytest.raises(SettingsError, match=r"DSH_STORE='xml'"),
    ):
        load_settings()
