"""Typed errors. Each one reads as a sentence that names what was wrong and where."""

from __future__ import annotations

__all__ = [
    "DshError",
    "LogFormatError",
    "SeqError",
    "SessionBusyError",
    "SessionExistsError",
    "SessionIdError",
    "SessionNotFoundError",
    "StoreAccessError",
    "StoreCorruptError",
    "StoreVersionError",
]


class DshError(Exception):
    """Base class of every error this project raises on purpose."""


class LogFormatError(DshError):
    """A session log (file, row or text) is not a valid DSH log.

    Attributes:
        source: file path or other name of the log (``"<text>"`` when read from a string).
        line: 1-based line number in the source, or ``None`` when not line-addressed (SQLite row).
        field: the offending field (``"seedLength"``, ``"data.dt"``…), or ``None``.
        reason: what is wrong, without the location.
    """

    def __init__(self, source: str, line: int | None, field: str | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {reason}")


class SeqError(DshError):
    """A batch of events does not continue the log (its first ``seq`` is not the next one)."""


class SessionNotFoundError(DshError, KeyError):
    """No session with that id in the store."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "session not found"


class SessionExistsError(DshError):
    """A session with that id already exists; creating it again would overwrite it."""


class SessionBusyError(DshError):
    """Another writer (in this or another process) holds the session open for writing."""


class StoreVersionError(DshError):
    """The store file has a schema version this code does not read (nothing was written)."""


class StoreCorruptError(DshError):
    """The store is damaged beyond the repairable torn tail (nothing was written)."""


class SessionIdError(DshError, ValueError):
    """A session id a store cannot hold (field ``id``); the message names the store."""


class StoreAccessError(DshError):
    """The store's file or folder cannot be opened, read or written (a directory where a file
    belongs, a file where a folder belongs, an I/O or locking failure); nothing was changed.

    Attributes:
        path: the file or folder the operation failed on.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
