"""Loading a scenario's scripts: the primary first, then the children in creation order."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_core import (
    Event,
    SessionLog,
    delegated_prompts,
    first_user_text,
    read_log_file,
)
from dsh_llm_replay._drift import NOT_RECORDED, RecordedHeaders, recorded_headers
from dsh_llm_replay._errors import ReplayError
from dsh_llm_replay._override import load_override
from dsh_llm_replay._script import ReplayEntry, ReplayHeader, derive_replay_script

__all__ = ["DelegatedCall", "SessionScript", "load_session_scripts"]


@dataclass(frozen=True, slots=True)
class DelegatedCall:
    """A recorded ``tool/call`` that handed a prompt to a child (its arguments hold one)."""

    call_id: str
    prompt: str


@dataclass(frozen=True, slots=True)
class SessionScript:
    """One recorded session's model calls, ready to be bound to a live session.

    Attributes:
        source: the log file it was derived from (names it in errors and reports).
        header: the recorded header (id, createdAt, seedLength).
        entries: one entry per recorded ``stream()`` call.
        prompt: the text of the session's own first ``user/message`` (for a child: the
            prompt it was delegated), ``None`` when it has none.
        delegated: the session's own ``tool/call``s that delegated a prompt, in log order.
        request_headers: the request headers its own calls were made with.
    """

    source: str
    header: ReplayHeader
    entries: tuple[ReplayEntry, ...]
    prompt: str | None = None
    delegated: tuple[DelegatedCall, ...] = ()
    request_headers: RecordedHeaders = NOT_RECORDED


def _delegated_calls(events: Sequence[Event]) -> tuple[DelegatedCall, ...]:
    return tuple(DelegatedCall(call_id, prompt) for _, call_id, prompt in delegated_prompts(events))


def _read_log(path: Path | str) -> SessionLog:
    try:
        return read_log_file(path)
    except FileNotFoundError:
        raise ReplayError(f"{path}: the recorded session log does not exist") from None
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read the recorded session log ({exc})") from None


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
    and patched. Children follow, sorted by ``(createdAt, id, file name)`` (numbers in the
    name compared as numbers), so the order they are given in never matters; each is derived
    from the events after its ``seedLength`` only, since the seeded prefix holds the parent's calls.

    Args:
        primary: the primary ``session.jsonl`` (it may be absent when ``override`` is a bare
            array: the header then defaults to id ``""``, createdAt 0).
        children: the children's logs, in any order (see above).
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
    events: Sequence[Event] = ()
    if patch is not None and patch.replace is not None and not Path(primary).exists():
        # An authored scenario before its first recording: the override is the whole script.
        header = ReplayHeader("", 0)
        entries = list(patch.replace)
    else:
        log = _read_log(primary)
        header = _header(log, source)
        events = log.events
        if patch is not None and patch.replace is not None:
            entries = list(patch.replace)
        else:
            entries = derive_replay_script(log.events, source)
            if patch is not None:
                entries = patch.apply(entries)
    scripts = [
        SessionScript(
            source,
            header,
            tuple(entries),
            first_user_text(events),
            _delegated_calls(events),
            recorded_headers(events),
        )
    ]
    kids: list[SessionScript] = []
    for child in children:
        child_source = str(child)
        child_log = _read_log(child)
        child_header = _header(child_log, child_source)
        own = child_log.events[child_header.seed_length :]
        events = own if seed_slice else child_log.events
        kids.append(
            SessionScript(
                child_source,
                child_header,
                tuple(derive_replay_script(events, child_source)),
                first_user_text(own),
                _delegated_calls(own),
                recorded_headers(own),
            )
        )
    kids.sort(
        key=lambda k: (k.header.created_at, _natural(k.header.id), _natural(Path(k.source).name))
    )
    return scripts + kids


def _natural(name: str) -> tuple[str | int, ...]:
    """``session.2.jsonl`` before ``session.10.jsonl`` (and ``{{session:2}}`` before
    ``{{session:10}}``, the ids of normalised fixtures): the tiebreaks of binding order.

    Normalized fixtures share createdAt 0 (and, in upstream's scheme, one placeholder id), so
    without it the order the caller listed the files in would decide which child takes which
    script."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))
