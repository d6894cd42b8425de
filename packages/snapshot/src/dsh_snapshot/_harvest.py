"""Harvest and expectations, each parsed once.

A run's logs are harvested through its store backend's own listing and export (a
``dsh.stores`` plugin, see ``dsh_core.plugins``): where a backend keeps them is its business,
so any installed backend can be harvested. A harvested log is read once (:func:`harvest_logs`)
and that parse serves the ordering, the cwds and ids to normalise and the normalising itself.
The expected side of a scenario is parsed and normalised once (:func:`expected_fixtures`) and
reused by the run on every backend.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dsh_core import (
    SessionLog,
    creation_order,
    log_normalizer,
    normalize_frames,
    normalize_log,
    parse_jsonl,
    read_log,
    read_log_file,
)
from dsh_core.plugins import store_backend
from dsh_snapshot._scenario import Scenario

__all__ = ["expected_fixtures", "harvest", "harvest_logs", "normalized_outputs"]


def _harvest_texts(root: Path, persistence: str) -> list[str]:
    backend = store_backend(persistence)
    return [backend.export_log(root, header.id) for header in backend.list_sessions(root)]


def harvest_logs(root: Path, persistence: str) -> list[SessionLog]:
    """Every session log the store backend ``persistence`` holds under a sessions root, each
    parsed once, in :func:`harvest` order.

    Raises:
        DshError: a log cannot be read; ``dsh_core.plugins.PluginError``: no such backend.
    """
    logs = [read_log(text.splitlines(), str(root)) for text in _harvest_texts(root, persistence)]
    return creation_order(logs)


def harvest(root: Path, persistence: str) -> list[str]:
    """Every session log the store backend ``persistence`` holds under a sessions root: the
    primary first, then children in :func:`dsh_core.creation_order`.

    Raises:
        DshError: a log cannot be read; ``dsh_core.plugins.PluginError``: no such backend.
    """
    texts = _harvest_texts(root, persistence)
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
) -> tuple[list[list[Any]], list[Any]]:
    """A run's harvested logs (in :func:`harvest_logs` order) and stdout frames, normalised:
    our scenarios name sessions by the tree scheme (``{{session:N}}``), upstream folders
    (no ``snapshot.yml``) by upstream's flat one (see :mod:`dsh_core._normalize`)."""
    norm = log_normalizer(logs, tree=scenario.meta is not None, cwds=cwds, session_ids=session_ids)
    return [normalize_log(log, norm) for log in logs], normalize_frames(frames, norm)


_EXPECTED_CACHE_SIZE = 64
_expected_cache: OrderedDict[tuple[Any, ...], tuple[list[list[Any]], list[Any]]] = OrderedDict()
_expected_lock = threading.Lock()


def expected_fixtures(scenario: Scenario) -> tuple[list[list[Any]], list[Any]]:
    """The normalised fixtures, parsed once per scenario and shared by every backend's run.

    Keyed by each file's path, size and mtime, so a rewritten fixture is read again. The
    result is shared: callers only read it.
    """
    files = [*scenario.session_files, scenario.stdout_file]
    key = tuple((str(p), *_signature(p)) for p in files)
    with _expected_lock:
        if key in _expected_cache:
            _expected_cache.move_to_end(key)
            return _expected_cache[key]
    value = _read_expected(scenario)
    with _expected_lock:
        _expected_cache[key] = value
        while len(_expected_cache) > _EXPECTED_CACHE_SIZE:
            _expected_cache.popitem(last=False)
    return value


def _signature(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (-1, -1)
    return (stat.st_size, stat.st_mtime_ns)


def _read_expected(scenario: Scenario) -> tuple[list[list[Any]], list[Any]]:
    parsed = [read_log_file(p) for p in scenario.session_files]
    raw: list[Any] = []
    if scenario.stdout_file.is_file():
        raw = parse_jsonl(
            scenario.stdout_file.read_text(encoding="utf-8"), str(scenario.stdout_file)
        )
    return normalized_outputs(scenario, parsed, raw)
