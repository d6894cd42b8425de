"""The damaged-log catalogue against the JSONL store: a typed error naming file, line and
field from load, resume and listing, and the stored bytes unchanged afterwards."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dsh_core import LogFormatError, read_log_bytes
from dsh_core.testing import DAMAGED_LOGS, DAMAGED_SESSION_ID, DamagedLog
from dsh_persistence_jsonl import JsonlSessionStore


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_catalogue_is_large_and_its_ids_unique() -> None:
    assert len(DAMAGED_LOGS) >= 25
    assert len({case.id for case in DAMAGED_LOGS}) == len(DAMAGED_LOGS)


@pytest.mark.parametrize("case", DAMAGED_LOGS, ids=[case.id for case in DAMAGED_LOGS])
def test_log_reader_names_line_and_field(case: DamagedLog) -> None:
    with pytest.raises(LogFormatError) as caught:
        read_log_bytes(case.data, "damaged.jsonl")
    assert (caught.value.source, caught.value.line, caught.value.field) == (
        "damaged.jsonl",
        case.line,
        case.field,
    )
    assert f"damaged.jsonl:{case.line}:" in str(caught.value)


# Damage after the last committed turn/end is a crash tail, cut on load as upstream's scanLog
# cuts it (test_upstream_jsonl.py); the log reader alone still refuses it (above).
UNCOMMITTED_TAIL = {"seq-gap-after-last-turn-end", "packed-row-next-seq-gap"}
COMMITTED = [case for case in DAMAGED_LOGS if case.id not in UNCOMMITTED_TAIL]


@pytest.mark.parametrize("case", COMMITTED, ids=[case.id for case in COMMITTED])
def test_store_refuses_damaged_log_and_leaves_it_untouched(
    tmp_path: Path, case: DamagedLog
) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    path = root / f"{DAMAGED_SESSION_ID}.jsonl"
    path.write_bytes(case.data)
    before = _sha(path)
    store = JsonlSessionStore(root)

    calls = {
        "load": lambda: store.load(DAMAGED_SESSION_ID),
        "resume": lambda: store.resume(DAMAGED_SESSION_ID),
        # a second resume proves the first released its lock: the same error, not busy
        "resume-again": lambda: store.resume(DAMAGED_SESSION_ID),
        "fresh-store-load": lambda: JsonlSessionStore(root).load(DAMAGED_SESSION_ID),
    }
    for name, call in calls.items():
        with pytest.raises(LogFormatError) as caught:
            call()
        error = caught.value
        assert (error.source, error.line, error.field) == (str(path), case.line, case.field), name
        assert str(path) in str(error)
        assert _sha(path) == before, f"{name} changed the file"

    if case.line == 1:  # the header itself is damaged: listing names it too
        with pytest.raises(LogFormatError) as listed:
            store.list_sessions()
        assert (listed.value.source, listed.value.line, listed.value.field) == (
            str(path),
            1,
            case.field,
        )
    else:
        assert [h.id for h in store.list_sessions()] == [DAMAGED_SESSION_ID]
    assert _sha(path) == before
    assert sorted(p.name for p in root.iterdir()) == [f"{DAMAGED_SESSION_ID}.jsonl"]


@pytest.mark.parametrize("case_id", sorted(UNCOMMITTED_TAIL))
def test_damage_in_the_uncommitted_tail_is_cut_on_load_without_writing(
    tmp_path: Path, case_id: str
) -> None:
    [case] = [c for c in DAMAGED_LOGS if c.id == case_id]
    path = tmp_path / f"{DAMAGED_SESSION_ID}.jsonl"
    path.write_bytes(case.data)
    before = _sha(path)
    log = JsonlSessionStore(tmp_path).load(DAMAGED_SESSION_ID)
    kept = read_log_bytes(b"\n".join(case.data.split(b"\n")[: case.line - 1]) + b"\n", "x")
    assert [e.seq for e in log.events][: len(kept.events)] == [e.seq for e in kept.events]
    assert log.events[-1].type == "turn/end"
    assert _sha(path) == before
