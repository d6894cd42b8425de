"""The crash harness: SIGKILL a writer subprocess at random moments, then check the store.

Each trial starts ``python -m dsh_core.testing._crash_writer`` against one store location;
the writer resumes (or creates) a session and appends whole synthetic turns, acknowledging
each append that returned. The parent kills it with SIGKILL after a random delay, opens a
new store instance, loads the session and checks that every acknowledged batch is there,
byte for byte (``dumps_event`` equality), under the header it was created with. The next
trial resumes the same session, so torn tails left by one kill are repaired by the next
writer and checked again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dsh_core._errors import SessionNotFoundError
from dsh_core._events import Event
from dsh_core._logformat import dumps_event
from dsh_core._session import SessionStore
from dsh_core.testing._crash_common import CRASH_CREATED_AT, crash_seed, load_store_class
from dsh_core.testing._eventgen import synthetic_turn

__all__ = ["CrashReport", "crash_kills", "run_crash_trials"]

_READY_TIMEOUT = 60.0


def crash_kills(default: int = 50) -> int:
    """The number of kills a crash test runs: ``DSH_CRASH_KILLS`` or ``default``."""
    raw = os.environ.get("DSH_CRASH_KILLS", "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"DSH_CRASH_KILLS must be an integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"DSH_CRASH_KILLS must be at least 1, got {value}")
    return value


@dataclass(slots=True)
class CrashReport:
    """What a crash run did and verified."""

    kills: int = 0
    """Writers killed with SIGKILL."""
    sessions: int = 0
    """Sessions written (a new one every ``trials_per_session`` kills)."""
    killed_before_ready: int = 0
    """Kills that landed before the writer had its session open (create/resume/repair)."""
    acknowledged_batches: int = 0
    """Appends that returned before their writer was killed."""
    verified_events: int = 0
    """Acknowledged events compared byte for byte after a kill (counted once per check)."""
    repaired_views: int = 0
    """Loads that returned synthetic closers or unacknowledged events past the last ack."""

    def summary(self) -> str:
        """One line for a test report."""
        return (
            f"{self.kills} kills over {self.sessions} sessions "
            f"({self.killed_before_ready} before ready), "
            f"{self.acknowledged_batches} acknowledged batches, "
            f"{self.verified_events} events verified, "
            f"{self.repaired_views} views past the last ack"
        )


@dataclass(slots=True, frozen=True)
class _Ack:
    first: int
    turn: int
    count: int


class _Reader(threading.Thread):
    """Collects the writer's complete stdout lines (a line cut by the kill is dropped).

    ``ready`` is set once the writer has its session open and has acknowledged at least
    ``min_acks`` batches (or filled its log, or exited).
    """

    def __init__(self, proc: subprocess.Popen[bytes], min_acks: int) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._min_acks = min_acks

    def run(self) -> None:
        assert self.proc.stdout is not None
        opened, acks = False, 0
        for raw in self.proc.stdout:
            if not raw.endswith(b"\n"):
                break
            line = raw.decode("utf-8").strip()
            self.lines.append(line)
            opened = opened or line.startswith("ready")
            acks += line.startswith("ack")
            if line == "full" or (opened and acks >= self._min_acks):
                self.ready.set()
        self.ready.set()


def _writer_env() -> dict[str, str]:
    env = dict(os.environ)
    # the writer must import exactly the code under test, wherever the parent found it
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def run_crash_trials(
    store_spec: str,
    location: Path,
    kills: int,
    seed: int,
    *,
    trials_per_session: int = 25,
    max_events: int = 20_000,
    early_kill_rate: float = 0.15,
    max_delay: float = 0.08,
    min_acks: int = 0,
) -> CrashReport:
    """Kill a writer ``kills`` times and check the store after every kill.

    Args:
        store_spec: ``"module:Class"``; the store is ``Class(location)``.
        location: the store's root directory or file (created by the store as needed).
        kills: number of SIGKILLs.
        seed: seeds the random delays, so a failing run can be repeated.
        trials_per_session: kills before the harness moves on to a fresh session.
        max_events: a writer stops appending (and waits to be killed) at this log length.
        early_kill_rate: share of kills aimed at start-up (create, resume, repair) rather
            than at the append loop.
        max_delay: longest delay, in seconds, between a writer being ready and its kill.
        min_acks: a writer is ready only once it acknowledged this many batches (or its
            log is full); start-up kills ignore it.

    Returns:
        A :class:`CrashReport`.

    Raises:
        AssertionError: an acknowledged batch is missing or different, or the header
            changed; the message names the session, the seq and both lines.
        RuntimeError: a writer exited on its own (its stderr is in the message).
    """
    store_class = load_store_class(store_spec)
    rng = random.Random(seed)
    report = CrashReport()
    env = _writer_env()
    seed_events = crash_seed()
    acks: list[_Ack] = []
    created = False
    session_id = ""
    stderr_path = Path(location).parent / f".crash-writer-{os.getpid()}-{seed}.stderr"
    try:
        for trial in range(kills):
            if trial % trials_per_session == 0:
                report.sessions += 1
                session_id = f"crash-{seed}-{report.sessions}"
                acks, created = [], False
            with stderr_path.open("wb") as stderr:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dsh_core.testing._crash_writer",
                        store_spec,
                        str(location),
                        session_id,
                        str(max_events),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=env,
                )
            reader = _Reader(proc, min_acks)
            reader.start()
            try:
                _kill_at_random(proc, reader, rng, early_kill_rate, max_delay)
            except RuntimeError as exc:
                raise RuntimeError(
                    f"{exc} ({session_id}): {stderr_path.read_text(errors='replace')}"
                ) from None
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                reader.join()
                assert proc.stdout is not None
                proc.stdout.close()
            if proc.returncode != -signal.SIGKILL:  # it died on its own before the kill
                raise RuntimeError(
                    f"crash writer for {session_id} exited with {proc.returncode} before "
                    f"the kill: {stderr_path.read_text(errors='replace')}"
                )
            report.kills += 1
            if not any(line.startswith("ready") for line in reader.lines):
                report.killed_before_ready += 1
            for line in reader.lines:
                word, *rest = line.split()
                if word == "created":
                    created = True
                elif word == "ack":
                    acks.append(_Ack(*(int(x) for x in rest)))
                    report.acknowledged_batches += 1
            _verify(
                store_class(location), store_spec, session_id, created, acks, seed_events, report
            )
    finally:
        stderr_path.unlink(missing_ok=True)
    return report


def _kill_at_random(
    proc: subprocess.Popen[bytes],
    reader: _Reader,
    rng: random.Random,
    early_kill_rate: float,
    max_delay: float,
) -> None:
    """SIGKILL ``proc`` at a random moment: during start-up, or after it is ready."""
    if rng.random() < early_kill_rate:
        time.sleep(rng.uniform(0.0, 0.3))
    else:
        if not reader.ready.wait(_READY_TIMEOUT):
            raise RuntimeError(f"crash writer not ready after {_READY_TIMEOUT}s")
        time.sleep(rng.uniform(0.0, max_delay))
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)


def _verify(
    store: SessionStore,
    store_spec: str,
    session_id: str,
    created: bool,
    acks: list[_Ack],
    seed_events: list[Event],
    report: CrashReport,
) -> None:
    try:
        try:
            log = store.load(session_id)
        except SessionNotFoundError:
            if created:
                raise AssertionError(
                    f"{store_spec}: session {session_id} vanished after its create returned"
                ) from None
            return
        header = log.header
        if header.created_at != CRASH_CREATED_AT or header.seed_length != len(seed_events):
            raise AssertionError(
                f"{store_spec}: session {session_id} header changed: "
                f"createdAt {header.created_at}, seedLength "
                f"{header.seed_length}"
            )
        lines = [dumps_event(e) for e in log.events]
        expected_seed = [dumps_event(e) for e in crash_seed()]
        if lines[: len(expected_seed)] != expected_seed:
            raise AssertionError(f"{store_spec}: session {session_id} lost or changed its seed")
        end = len(expected_seed)
        for ack in acks:
            expected = [dumps_event(e) for e in synthetic_turn(ack.first, ack.turn)]
            if len(expected) != ack.count:
                raise AssertionError(
                    f"writer acknowledged {ack.count} events at seq "
                    f"{ack.first}, the generator makes {len(expected)}"
                )
            for offset, want in enumerate(expected):
                seq = ack.first + offset
                got = lines[seq] if seq < len(lines) else "<missing>"
                if got != want:
                    raise AssertionError(
                        f"{store_spec}: session {session_id} seq {seq} "
                        f"(acknowledged) differs after a kill:\n"
                        f"  want {want}\n  got  {got}"
                    )
            report.verified_events += ack.count
            end = ack.first + ack.count
        if len(lines) > end:
            report.repaired_views += 1
    finally:
        store.close()
