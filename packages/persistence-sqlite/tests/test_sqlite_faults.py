"""Faults found probing the SQLite store by hand: symlinked writers, lock files piling up,
and raw ``sqlite3`` / ``OSError`` / ``ValueError`` exceptions that must be typed errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dsh_core import (
    CreateOptions,
    LogFormatError,
    SessionBusyError,
    SessionIdError,
    SessionMeta,
    StoreAccessError,
)
from dsh_core.testing import synthetic_turn
from dsh_persistence_sqlite import SqliteSessionStore


def _store_with_session(tmp_path: Path) -> tuple[SqliteSessionStore, Path]:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    session = store.create(
        CreateOptions(session_id="s", seed=synthetic_turn(0, 1), meta=SessionMeta(cwd="/w"))
    )
    session.close()
    return store, path


def test_a_symlink_to_the_same_database_does_not_let_a_second_writer_in(tmp_path: Path) -> None:
    store, path = _store_with_session(tmp_path)
    link = tmp_path / "link.sqlite3"
    link.symlink_to(path)
    through_link = SqliteSessionStore(link)
    writer = store.resume("s")
    with pytest.raises(SessionBusyError, match="already open for writing"):
        through_link.resume("s")
    writer.close()
    through_link.resume("s").close()  # free again once the first writer is gone
    assert not (tmp_path / "link.sqlite3.locks").exists()


def test_lock_files_do_not_pile_up(tmp_path: Path) -> None:
    store, path = _store_with_session(tmp_path)
    for n in range(5):
        store.create(CreateOptions(session_id=f"t{n}")).close()
        store.resume(f"t{n}").close()
    assert list(Path(f"{path}.locks").iterdir()) == []


def test_a_directory_or_a_file_in_the_way_is_a_typed_error(tmp_path: Path) -> None:
    directory = tmp_path / "dir.sqlite3"
    directory.mkdir()
    with pytest.raises(StoreAccessError, match="is a directory, not an SQLite store file") as e:
        SqliteSessionStore(directory)
    assert e.value.path == str(directory)
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(StoreAccessError, match="Not a directory"):
        SqliteSessionStore(a_file / "x.sqlite3")
    store, path = _store_with_session(tmp_path)
    Path(f"{path}.locks", "s.lock").mkdir()
    with pytest.raises(StoreAccessError, match=r"s\.lock: cannot open the writer lock"):
        store.resume("s")


@pytest.mark.parametrize(
    ("statement", "field"),
    [
        ("UPDATE sessions SET cwd = CAST(x'2fff' AS TEXT)", "sessions[id='s'].cwd"),
        ("UPDATE events SET data = CAST(x'7bff7d' AS TEXT) WHERE seq = 2", "events[seq=2].data"),
        ("UPDATE events SET type = CAST(x'c3' AS TEXT) WHERE seq = 1", "events[seq=1].type"),
    ],
)
def test_text_that_is_not_utf8_names_the_file_row_and_column(
    tmp_path: Path, statement: str, field: str
) -> None:
    store, path = _store_with_session(tmp_path)
    with sqlite3.connect(path) as raw:
        raw.execute(statement)
    raw.close()
    for read in (store.load, store.resume, store.export_jsonl):
        with pytest.raises(LogFormatError) as error:
            read("s")
        assert (error.value.source, error.value.field) == (str(path), field)
        assert "not valid UTF-8" in str(error.value)
    if field.startswith("sessions"):
        with pytest.raises(LogFormatError, match="not valid UTF-8"):
            store.list_sessions()


def test_other_operational_errors_are_typed_and_name_the_file(tmp_path: Path) -> None:
    store, path = _store_with_session(tmp_path)
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE events")  # someone else broke the schema under us
    raw.close()
    with pytest.raises(StoreAccessError, match="no such table: events") as error:
        store.load("s")
    assert error.value.path == str(path)


@pytest.mark.parametrize("bad", ["", "\udc80", None, 7])
def test_an_id_that_is_not_a_utf8_string_is_a_typed_value_error(tmp_path: Path, bad: Any) -> None:
    store, path = _store_with_session(tmp_path)
    for call in (store.load, store.resume, store.export_jsonl):
        with pytest.raises(SessionIdError, match=f"^{path}: field 'id'"):
            call(bad)
        with pytest.raises(ValueError, match="not a non-empty UTF-8 string"):  # still one
            call(bad)
