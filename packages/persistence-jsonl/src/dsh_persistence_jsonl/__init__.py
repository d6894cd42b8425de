"""dsh-persistence-jsonl: session logs as one JSONL file per session.

The header and the seed are published atomically (temporary file, fsync, rename, directory
fsync); every later batch is one append and one fsync. A torn tail left by a crash is cut
away on load and repaired on resume; any other damage is a typed error and the file is left
untouched. One writer per session at a time, enforced with ``flock``.
"""

from dsh_persistence_jsonl._store import JsonlSessionStore, check_session_id

__all__ = ["JsonlSessionStore", "check_session_id"]
