"""Fixtures shared by dsh-core's tests: the anyio backend and the sandbox's precondition."""

from __future__ import annotations

import os

import pytest

from dsh_core import SandboxMechanisms


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def needs_sandbox() -> None:
    """Skip a module of real-bubblewrap tests where a sandbox mechanism is missing, except in
    CI (``CI=true``): the gate runs strict there, so a missing mechanism fails them instead."""
    found = SandboxMechanisms.probe()
    if not found.missing:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and this system lacks a sandbox mechanism: {found.missing}")
    pytest.skip(f"this system lacks a sandbox mechanism: {found.missing}")
