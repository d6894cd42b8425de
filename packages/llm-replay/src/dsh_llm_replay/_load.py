"""Loading a scenario's scripts: the primary first, then the children in creation order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_core import SessionLog, read_log_bytes, read_log_text
from dsh_llm_replay._errors import ReplayError
from dsh_llm_replay._override import load_override
from dsh_llm_replay._script import ReplayEntry, ReplayHeader, derive_replay_script

__all__ = ["SessionScript", "load_session_scripts"]


@dataclass(frozen=True, slots=True)
class SessionScript:
    """One recorded session's model calls, ready to be bound to a live session.

    Attributes:
        source: the log file it was derived from (names it in errors and reports).
        header: the recorded header (id, createdAt, seedLength).
        entries: one entry per recorded ``stream()`` call.
    """

    source: str
    header: ReplayHeader
    entries: tuple[ReplayEntry, ...]


def _read_log(path: Path | str) -> SessionLog:
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ReplayError(f"{source}: the recorded session log does not exist") from None
    except OSError as exc:
        raise ReplayError(f"{source}: cannot read the recorded session log ({exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return read_log_bytes(data, source)  # raises the LogFormatError naming the line
    return read_log_text(text, source)


def _header(log: SessionLog, source: str) -> ReplayHeader:
    header = log.header
    seed = header.effective_seed_length
    if seed > len(log.events):
        raise ReplayError(
            f"{source}: seedLength {seed} is past the end of the log, which has "
            f"{len(log.events)} events"
        )
    return ReplayHeader(header.id, header.created_at, seed, header.parent_session)


def load_session_scripts(
    primary: Path | str,
    children: Sequence[Path | str] = (),
    override: Path | str | None = None,
    *,
    seed_slice: bool = True,
) -> list[SessionScript]:
    """Derive every script of a scenario, in binding order.

    The primary's script comes first: from ``override`` when it is a bare array (the log is
    then not derived at all, so calls that threw or hung in it need no finish), else derived
    and patched. Children follow, sorted by ``(createdAt, id)``; each is derived from the
    events after its ``seedLength`` only, since the seeded prefix holds the parent's calls.

    Args:
        primary: the primary ``session.jsonl`` (it may be absent when ``override`` is a bare
            array: the header then defaults to id ``""``, createdAt 0).
        children: the children's logs, in any order.
        override: the primary's ``replay.override.json``, if the scenario has one (a path
            that does not exist is ignored, as upstream does).
        seed_slice: ``False`` derives children from all their events, the upstream bug; it
            exists only for the red-to-green proof (``DSH_REPLAY_SEED_SLICE=0``).

    Raises:
        ReplayError: a log is missing or its seedLength is past its end.
        dsh_core.LogFormatError: a log is not a valid session log.
        UnterminatedGroupError: a recorded call has no finish and no override replaces it.
        OverrideError: the override is invalid.
    """
    source = str(primary)
    # As upstream: an override path that names no file is no override.
    patch = load_override(override) if override is not None and Path(override).exists() else None
    if patch is not None and patch.replace is not None and not Path(primary).exists():
        # An authored scenario before its first recording: the override is the whole script.
        header = ReplayHeader("", 0)
        entries = list(patch.replace)
    else:
        log = _read_log(primary)
        header = _header(log, source)
        if patch is not None and patch.replace is not None:
            entries = list(patch.replace)
        else:
            entries = derive_replay_script(log.events, source)
            if patch is not None:
                entries = patch.apply(entries)
    scripts = [SessionScript(source, header, tuple(entries))]
    kids: list[SessionScript] = []
    for child in children:
        child_source = str(child)
        child_log = _read_log(child)
        child_header = _header(child_log, child_source)
        events = child_log.events
        if seed_slice and child_header.seed_length:
            events = events[child_header.seed_length :]
        kids.append(
            SessionScript(
                child_source, child_header, tuple(derive_replay_script(events, child_source))
            )
        )
    kids.sort(key=lambda script: (script.header.created_at, script.header.id))
    return scripts + kids
