"""dsh-sessions: list, show, check and convert dsh session stores of every upstream era.

A store path is an SQLite file (upstream's June v3 and v4, dsh-py's 1004; read-only), a JSONL
log, or a JSONL root (dsh-py's ``<id>.jsonl`` or upstream's ``cwd-<hash>/<id>.jsonl``).
:func:`open_source` reads one without writing; :func:`convert` writes its logs as a new
dsh-py JSONL or SQLite store; :func:`open_any` and :func:`convert_to_store` do the same for
a sessions root in a server store (``postgres:ROOT``). The console script ``dsh-sessions``
is the front end.
"""

from dsh_sessions._convert import Target, convert, target_for
from dsh_sessions._sources import (
    SQLITE_ROOT_FILE,
    Entry,
    Source,
    StoredLog,
    iter_logs,
    open_source,
    read_jsonl,
)
from dsh_sessions._stores import (
    StoreRoot,
    convert_to_store,
    open_any,
    open_store_root,
    parse_store_root,
)

__all__ = [
    # reading
    "SQLITE_ROOT_FILE",
    "Entry",
    "Source",
    "StoredLog",
    "iter_logs",
    "open_source",
    "read_jsonl",
    # writing
    "Target",
    "convert",
    "target_for",
    # server stores (postgres:ROOT), through the dsh.stores registry
    "StoreRoot",
    "convert_to_store",
    "open_any",
    "open_store_root",
    "parse_store_root",
]
