"""The writer half of the crash harness: ``python -m dsh_core.testing._crash_writer``.

Arguments: ``<module:Class> <location> <session_id> <max_events>``. It opens
``Class(location)``, resumes the session (or creates it with a one-turn seed), then appends
whole synthetic turns forever, printing one line on stdout after each append returned:

- ``created <n>`` once ``create`` returned with an ``n``-event seed;
- ``ready <next_seq>`` once the session is open for writing;
- ``ack <first_seq> <turn> <count>`` after each batch;
- ``full`` when the log reached ``max_events`` (it then waits to be killed).

The parent kills it with SIGKILL and checks that every acknowledged batch survived. The
package never imports this module, so ``python -m`` runs it without a double import.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dsh_core._errors import SessionNotFoundError
from dsh_core._session import CreateOptions, SessionMeta, SessionStore
from dsh_core.testing._crash_common import CRASH_CREATED_AT, crash_seed, load_store_class
from dsh_core.testing._eventgen import synthetic_turn

__all__ = ["main"]


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    spec, location, session_id, max_events = argv
    store: SessionStore = load_store_class(spec)(Path(location))
    try:
        session = store.resume(session_id)
    except SessionNotFoundError:
        seed = crash_seed()
        session = store.create(
            CreateOptions(
                session_id=session_id,
                seed=seed,
                meta=SessionMeta(created_at=CRASH_CREATED_AT, seed_length=len(seed)),
            )
        )
        _say(f"created {len(seed)}")
    _say(f"ready {session.next_seq}")
    turn = 1 + max(
        (int(e.data.get("turn", 0)) for e in session.events if e.type == "turn/start"), default=0
    )
    while session.next_seq < int(max_events):
        first = session.next_seq
        batch = synthetic_turn(first, turn)
        for event in batch:
            session.add(event)
        session.flush()
        _say(f"ack {first} {turn} {len(batch)}")
        turn += 1
    _say("full")
    while True:  # keep the writer lock until the parent kills us
        time.sleep(1)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
