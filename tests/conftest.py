"""Shared by the cross-package tests: the test plugins (``tests/plugins/``) a module needs.

A module marked ``pytest.mark.test_plugin("dsh-model-acme")`` runs only where that package is
installed. The dev group leaves the test plugins out (an installed store backend joins the
gate's default set, and the gate a developer runs must be the README's), so there its tests
skip; ``nox -s "tests(package='workspace')"`` installs them and sets
``DSH_REQUIRE_TEST_PLUGINS=1``, where a missing one is a failure, never a skip.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, distribution

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "test_plugin(name): needs the test plugin package `name` (tests/plugins/)"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("test_plugin"):
        name = str(mark.args[0])
        try:
            distribution(name)
        except PackageNotFoundError:
            if os.environ.get("DSH_REQUIRE_TEST_PLUGINS") == "1":
                pytest.fail(f"{name} is not installed (uv sync --group test-plugins)")
            pytest.skip(
                f"{name} is installed by nox -s \"tests(package='workspace')\" "
                "(or uv sync --group test-plugins)"
            )
