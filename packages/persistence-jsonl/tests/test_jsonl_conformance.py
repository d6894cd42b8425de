"""The shared store conformance suite, run against ``JsonlSessionStore``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_core import SessionStore
from dsh_core.testing import StoreConformance
from dsh_persistence_jsonl import JsonlSessionStore


class TestJsonlConformance(StoreConformance):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Callable[[], SessionStore]:
        return lambda: JsonlSessionStore(tmp_path / "sessions")

    @pytest.fixture
    def tear_tail(self, tmp_path: Path) -> Callable[[str, bytes], None]:
        def tear(session_id: str, partial_line: bytes) -> None:
            with (tmp_path / "sessions" / f"{session_id}.jsonl").open("ab") as f:
                f.write(partial_line)

        return tear
