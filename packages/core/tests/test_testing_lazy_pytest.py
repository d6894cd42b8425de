"""``import dsh_core.testing`` must work where pytest is not installed."""

from __future__ import annotations

import subprocess
import sys

import dsh_core.testing

_PROBE = """
import sys
sys.modules["pytest"] = None  # as if pytest were not installed
import dsh_core.testing
assert "dsh_core.testing._conformance" not in sys.modules
dsh_core.testing.InMemorySessionStore()
try:
    dsh_core.testing.StoreConformance
except ImportError:
    print("lazy")
"""


def test_store_conformance_is_imported_only_when_asked_for() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lazy"


def test_every_public_name_resolves() -> None:
    for name in dsh_core.testing.__all__:
        assert getattr(dsh_core.testing, name) is not None
    assert dsh_core.testing.StoreConformance.__name__ == "StoreConformance"
