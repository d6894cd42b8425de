"""A pytest plugin that turns live model calls off for a whole test run.

Load it with ``-p dsh_core.testing.live_guard`` (the workspace's pytest configuration does):
it sets ``DSH_ALLOW_MODEL_REQUESTS=0`` before collection, so every live model client in the
run, and in every subprocess it starts (agents, xdist workers), refuses any host but
loopback — the way pydantic-ai's test suite sets ``ALLOW_MODEL_REQUESTS = False``. A test that
needs the switch on sets the variable itself (``monkeypatch.setenv``).
"""

from __future__ import annotations

import os

from dsh_core._model import ALLOW_MODEL_REQUESTS_ENV

__all__ = ["pytest_configure"]


def pytest_configure() -> None:
    """Turn live model calls off for this process and its children."""
    os.environ[ALLOW_MODEL_REQUESTS_ENV] = "0"
