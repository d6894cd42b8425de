"""What both halves of the crash harness share: the session's seed, header and store."""

from __future__ import annotations

import importlib
from typing import Any

from dsh_core._events import Event
from dsh_core.testing._eventgen import synthetic_turn

__all__ = ["CRASH_CREATED_AT", "crash_seed", "load_store_class"]

CRASH_CREATED_AT = 1_780_000_000_123


def crash_seed() -> list[Event]:
    """The seed every crash session is created with (turn 0, numbered from 0)."""
    return synthetic_turn(0, 0)


def load_store_class(spec: str) -> Any:
    """Import ``"module:Class"``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"store spec must be 'module:Class', got {spec!r}")
    return getattr(importlib.import_module(module_name), attr)
