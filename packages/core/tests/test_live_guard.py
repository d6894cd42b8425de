"""Core's one live-call guard: the switches, the loopback rule, and the error it raises."""

from __future__ import annotations

import sys
import types

import pytest

import dsh_core
from dsh_core import (
    ALLOW_MODEL_REQUESTS_ENV,
    ModelError,
    ModelRequestsDisabledError,
    check_model_request,
    is_loopback_url,
    model_requests_allowed,
)

REMOTE = "https://api.example.com/v1"


@pytest.fixture
def on(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Live calls on (the test run turns them off for everything else)."""
    monkeypatch.delenv(ALLOW_MODEL_REQUESTS_ENV, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/v1", "http://[::1]:9/v1", "http://localhost/v1", "http://127.9.9.9"],
)
def test_loopback_urls(url: str) -> None:
    assert is_loopback_url(url)


@pytest.mark.parametrize(
    "url",
    [REMOTE, "http://localhost.example.com/v1", "http://10.0.0.1/v1", "not a url", ""],
)
def test_other_urls_are_not_loopback(url: str) -> None:
    assert not is_loopback_url(url)


def test_on_by_default(on: pytest.MonkeyPatch) -> None:
    assert model_requests_allowed()
    check_model_request(REMOTE)  # no error


@pytest.mark.parametrize("value", ["0", "false", "No", " OFF "])
def test_the_environment_turns_it_off(on: pytest.MonkeyPatch, value: str) -> None:
    on.setenv(ALLOW_MODEL_REQUESTS_ENV, value)
    assert not model_requests_allowed()
    with pytest.raises(ModelRequestsDisabledError) as err:
        check_model_request(REMOTE)
    assert err.value.code == "MODEL_REQUESTS_DISABLED"
    assert err.value.url == REMOTE
    assert isinstance(err.value, ModelError)
    check_model_request("http://127.0.0.1:1/v1")  # loopback stays allowed


def test_core_switch_turns_it_off(on: pytest.MonkeyPatch) -> None:
    on.setattr(dsh_core, "ALLOW_MODEL_REQUESTS", False)
    with pytest.raises(ModelRequestsDisabledError, match=r"dsh_core\.ALLOW_MODEL_REQUESTS"):
        check_model_request(REMOTE, "some_wire")


def test_a_package_switch_counts_and_is_named(on: pytest.MonkeyPatch) -> None:
    wire = types.ModuleType("some_wire")
    wire.ALLOW_MODEL_REQUESTS = False  # type: ignore[attr-defined]
    on.setitem(sys.modules, "some_wire", wire)
    assert model_requests_allowed()  # the package is not on this call's path
    assert not model_requests_allowed("some_wire")
    with pytest.raises(ModelRequestsDisabledError, match=r"some_wire\.ALLOW_MODEL_REQUESTS"):
        check_model_request(REMOTE, "some_wire", "some_profile")


def test_the_environment_names_the_last_package(on: pytest.MonkeyPatch) -> None:
    # the profile's switch is the one a user of that profile would look for
    on.setenv(ALLOW_MODEL_REQUESTS_ENV, "0")
    with pytest.raises(ModelRequestsDisabledError, match=r"some_profile\.ALLOW_MODEL_REQUESTS"):
        check_model_request(REMOTE, "some_wire", "some_profile", None)


def test_a_package_not_imported_is_never_imported(on: pytest.MonkeyPatch) -> None:
    assert "dsh_no_such_package" not in sys.modules
    assert model_requests_allowed("dsh_no_such_package")
    assert "dsh_no_such_package" not in sys.modules
