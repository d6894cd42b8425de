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
from pathlib import Path
from typing import Any

from dsh_core import SessionLog, read_log, read_log_file
from dsh_core.plugins import store_backend
from dsh_snapshot._normalize import (
    Normalizer,
    logs_cwds_and_ids,
    normalize_frames,
    normalize_log,
    parse_jsonl,
)
from dsh_snapshot._scenario import Scenario

__all__ = ["expected_fixtures", "harvest", "harvest_logs"]


def _log_order(log: SessionLog) -> tuple[int, int, int, str]:
    first_time = log.events[0].time if log.events else 0
    child = 1 if log.header.parent_session else 0
    # (createdAt, id) is the contract; the first event's time only breaks a same-millisecond
    # tie between siblings, which a random id would otherwise order at random.
    return (child, log.header.created_at, first_time, log.header.id)


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
    return sorted(logs, key=_log_order)


def harvest(root: Path, persistence: str) -> list[str]:
    """Every session log the store backend ``persistence`` holds under a sessions root: the
    primary first, then children by ``(createdAt, id)``.

    Raises:
        DshError: a log cannot be read; ``dsh_core.plugins.PluginError``: no such backend.
    """
    texts = _harvest_texts(root, persistence)
    keys = [_log_order(read_log(text.splitlines(), str(root))) for text in texts]
    return [text for _, text in sorted(zip(keys, texts, strict=True), key=lambda pair: pair[0])]


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
    cwds, ids = logs_cwds_and_ids(parsed)
    norm = Normalizer(cwds, ids)
    logs = [normalize_log(log, norm) for log in parsed]
    frames: list[Any] = []
    if scenario.stdout_file.is_file():
        raw = parse_jsonl(
            scenario.stdout_file.read_text(encoding="utf-8"), str(scenario.stdout_file)
        )
        frames = normalize_frames(raw, norm)
    return logs, frames
