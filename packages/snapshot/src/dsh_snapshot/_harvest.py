"""Harvest and expectations, each parsed once.

A run's logs are harvested through its store backend's own listing and export (a
``dsh.stores`` plugin, see ``dsh_core.plugins``): where a backend keeps them is its business,
so any installed backend can be harvested. A harvested log is read once (:func:`harvest_logs`)
and that parse serves the ordering, the cwds and ids to normalise and the normalising itself.
The expected side of a scenario is parsed and normalised once (:func:`expected_fixtures`) and
reused by the run on every backend.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from dsh_core import (
    SessionLog,
    creation_order,
    log_normalizer,
    normalize_frames,
    normalize_log,
    parse_jsonl,
    read_log,
    read_log_bytes,
)
from dsh_core.plugins import store_backend
from dsh_snapshot import _fsafe as fsafe
from dsh_snapshot._determinism import (
    Determinism,
    ignore_fields,
    order_free,
    patterns,
    without_updates,
)
from dsh_snapshot._scenario import Scenario

__all__ = ["FileCache", "expected_fixtures", "harvest", "harvest_logs", "normalized_outputs"]


def _harvest_texts(root: Path, store: str) -> list[str]:
    backend = store_backend(store)
    return [backend.export_log(root, header.id) for header in backend.list_sessions(root)]


def harvest_logs(root: Path, store: str) -> list[SessionLog]:
    """Every session log the store backend ``store`` holds under a sessions root, each
    parsed once, in :func:`harvest` order.

    Raises:
        DshError: a log cannot be read; ``dsh_core.plugins.PluginError``: no such backend.
    """
    logs = [read_log(text.splitlines(), str(root)) for text in _harvest_texts(root, store)]
    return creation_order(logs)


def harvest(root: Path, store: str) -> list[str]:
    """Every session log the store backend ``store`` holds under a sessions root: the
    primary first, then children in :func:`dsh_core.creation_order`.

    Raises:
        DshError: a log cannot be read; ``dsh_core.plugins.PluginError``: no such backend.
    """
    texts = _harvest_texts(root, store)
    logs = [read_log(text.splitlines(), str(root)) for text in texts]
    position = {id(log): index for index, log in enumerate(logs)}
    return [texts[position[id(log)]] for log in creation_order(logs)]


def normalized_outputs(
    scenario: Scenario,
    logs: list[SessionLog],
    frames: list[Any],
    *,
    cwds: Iterable[str] = (),
    session_ids: Iterable[str] = (),
    literals: Mapping[str, str] | None = None,
) -> tuple[list[list[Any]], list[Any]]:
    """A run's harvested logs (in :func:`harvest_logs` order) and stdout frames, normalised:
    our scenarios name sessions by the tree scheme (``{{session:N}}``), upstream folders
    (no ``snapshot.yml``) by upstream's flat one (see :mod:`dsh_core._normalize`); then the
    scenario's own rules (:mod:`dsh_snapshot._determinism`): ``literals`` (the run's home and
    temp dir → their placeholders) and ``scrub:`` in the text, ``ignore_fields:`` and
    ``unordered_updates:`` / ``ignore_updates:`` in the structure. The expected side goes
    through the same."""
    rules = scenario.meta.determinism if scenario.meta is not None else Determinism()
    norm = log_normalizer(
        logs,
        tree=scenario.meta is not None,
        cwds=cwds,
        session_ids=session_ids,
        literals=literals,
        patterns=patterns(rules.scrub),
    )
    out_logs = [ignore_fields(normalize_log(log, norm), rules.ignore_fields) for log in logs]
    out_frames = ignore_fields(normalize_frames(frames, norm), rules.ignore_fields)
    kept = without_updates(out_frames, rules.ignore_updates)
    return out_logs, order_free(kept, rules.unordered_updates)


_T = TypeVar("_T")


class FileCache(Generic[_T]):
    """Values computed from a scenario's fixture files, each computed once and shared by every
    run of the scenario (every backend, every worker thread).

    Keyed by each file's path, size and mtime, so a rewritten fixture is read again; the least
    recently used of more than ``size`` entries is dropped. Values are shared: callers only
    read them.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._values: OrderedDict[tuple[Any, ...], _T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, files: Sequence[Path], compute: Callable[[], _T]) -> _T:
        """The value for ``files`` as they are now, from ``compute`` when not yet known."""
        key = tuple((str(p), *_signature(p)) for p in files)
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = compute()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self._size:
                self._values.popitem(last=False)
        return value


_expected_cache: FileCache[tuple[list[list[Any]], list[Any]]] = FileCache()


def expected_fixtures(scenario: Scenario) -> tuple[list[list[Any]], list[Any]]:
    """The normalised fixtures, parsed once per scenario and shared by every backend's run
    (see :class:`FileCache`)."""
    files = [*scenario.session_files, scenario.stdout_file]
    return _expected_cache.get(files, lambda: _read_expected(scenario))


def _signature(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (-1, -1)
    return (stat.st_size, stat.st_mtime_ns)


def _read_expected(scenario: Scenario) -> tuple[list[list[Any]], list[Any]]:
    # Through the one confined open: a committed fixture that is a link (or reached through
    # one) is an error naming it, never the file it points to.
    parsed = [
        read_log_bytes(fsafe.read_bytes(p.parent, p.name), str(p)) for p in scenario.session_files
    ]
    raw: list[Any] = []
    stdout = scenario.stdout_file
    if os.path.lexists(stdout):
        raw = parse_jsonl(fsafe.read_text(stdout.parent, stdout.name), str(stdout))
    return normalized_outputs(scenario, parsed, raw)
