"""What makes any agent's run repeatable: ``snapshot.yml``'s determinism settings.

An agent we did not write puts whatever it likes into its requests and output: the run's cwd,
its private home and temp dir, today's date, timings. The gate makes both sides of every
comparison agree on those:

- the run's cwd, ``HOME`` and ``TMPDIR`` become ``{{cwd}}``, ``{{home}}``, ``{{tmp}}`` in
  everything written and everything compared (the proxy does the same to a replayed request
  and puts the live paths back into the answers it replays, see ``dsh_llm_proxy``);
- ``scrub:`` — user scrubbers, ``pattern`` (a regex) → ``placeholder``, applied to request and
  output text after the built-in ones, before comparing and before writing;
- ``ignore_fields:`` — dotted key paths (``_meta.durationMs``) whose values in stdout frames and
  logs are replaced by ``{{ignored}}`` wherever that chain of keys appears;
- ``unordered_updates:`` — ``session/update`` kinds (``available_commands_update``) whose
  position among the frames does not matter: they are compared as a set, collected after the
  other frames in one canonical order;
- ``ignore_updates:`` — ``session/update`` kinds left out of the comparison altogether: a
  notification an agent sends on its own schedule (Qwen Code's ``available_commands_update``
  arrives after the last answer on some runs, before the agent exits on others, not at all
  when it exits first);
- ``clock:`` — a fixed start time for the agent process (libfaketime from Debian's
  ``faketime`` package, ``TZ=UTC``): a date the agent writes into its prompt stays the recorded one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from dsh_core import TextPattern, host_which
from dsh_llm_proxy import Scrub

__all__ = [
    "HOME",
    "IGNORED",
    "TMP",
    "Determinism",
    "Scrubber",
    "clock_command",
    "faketime_library",
    "ignore_fields",
    "order_free",
    "without_updates",
    "patterns",
]

HOME = "{{home}}"
TMP = "{{tmp}}"
IGNORED = "{{ignored}}"
# A scrubber's regex comes from a scenario, which arrives in a pull request: bounded in
# length, compiled once, by RE2 (Scrub.build): its run time is linear in the text it meets.
_MAX_PATTERN = 500
_PLACEHOLDER = r"^\{\{[A-Za-z][A-Za-z0-9_.:-]*\}\}$"
_KIND = r"^[A-Za-z_][A-Za-z0-9_]*$"
_FIELD_PATH = r"^[^.\s]+(\.[^.\s]+)*$"


def _compiles(value: str) -> str:
    # The proxy compiles the same patterns on the replay side: one check for both.
    try:
        Scrub.build(patterns=[("{{check}}", value)])
    except ValueError as exc:
        raise ValueError(str(exc).removeprefix("scrub ")) from None
    return value


def _fixed_time(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an ISO date and time (e.g. '2026-01-15T09:00:00')"
        ) from None
    if moment.tzinfo is not None:
        raise ValueError(f"{value!r}: give the time without a zone; the agent runs with TZ=UTC")
    return moment.isoformat(sep=" ")


class Scrubber(BaseModel):
    """One user scrubber: every match of ``pattern`` becomes ``placeholder``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    pattern: Annotated[str, Field(min_length=1, max_length=_MAX_PATTERN), AfterValidator(_compiles)]
    placeholder: str = Field(pattern=_PLACEHOLDER)


FieldPath = Annotated[str, Field(pattern=_FIELD_PATH, max_length=200)]
"""A dotted chain of JSON object keys (``_meta.durationMs``)."""
UpdateKind = Annotated[str, Field(pattern=_KIND, max_length=100)]
FixedClock = Annotated[str, AfterValidator(_fixed_time)]


class Determinism(BaseModel):
    """The determinism settings of one scenario (``snapshot.yml``'s fields of these names)."""

    model_config = ConfigDict(frozen=True)

    scrub: tuple[Scrubber, ...] = ()
    ignore_fields: tuple[FieldPath, ...] = ()
    unordered_updates: tuple[UpdateKind, ...] = ()
    ignore_updates: tuple[UpdateKind, ...] = ()
    clock: FixedClock | None = None


def patterns(scrubbers: Sequence[Scrubber]) -> list[tuple[TextPattern, str]]:
    """The scrubbers as compiled ``(regex, placeholder)`` pairs, in order."""
    return list(Scrub.build(patterns=[(s.placeholder, s.pattern) for s in scrubbers]).patterns)


# --- outputs ------------------------------------------------------------------------------------


def ignore_fields(value: Any, paths: Sequence[str]) -> Any:
    """``value`` with every listed key chain's value replaced by ``{{ignored}}``, wherever the
    chain starts (``_meta.durationMs`` matches ``{"_meta": {"durationMs": 12}}`` at any depth)."""
    if not paths:
        return value
    chains = [tuple(p.split(".")) for p in paths]
    return _ignore(value, chains, [])


def _ignore(value: Any, chains: list[tuple[str, ...]], active: list[tuple[str, ...]]) -> Any:
    """``active``: the rest of each chain whose first keys lead here; every chain may also
    start afresh at any object."""
    if isinstance(value, list):
        return [_ignore(v, chains, []) for v in cast(list[Any], value)]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    candidates = [*active, *chains]
    for key, item in cast(dict[str, Any], value).items():
        if (key,) in candidates:
            out[key] = IGNORED
        else:
            deeper = [c[1:] for c in candidates if len(c) > 1 and c[0] == key]
            out[key] = _ignore(item, chains, deeper)
    return out


def _update_kind(frame: Any) -> str | None:
    if not isinstance(frame, dict):
        return None
    obj = cast(dict[str, Any], frame)
    if obj.get("method") != "session/update":
        return None
    params = obj.get("params")
    update = cast(dict[str, Any], params).get("update") if isinstance(params, dict) else None
    kind = cast(dict[str, Any], update).get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else None


def without_updates(frames: Sequence[Any], kinds: Sequence[str]) -> list[Any]:
    """``frames`` without the ``session/update`` notifications of the given kinds."""
    wanted = set(kinds)
    return [f for f in frames if not wanted or _update_kind(f) not in wanted]


def order_free(frames: Sequence[Any], kinds: Sequence[str]) -> list[Any]:
    """``frames`` with every ``session/update`` of the given kinds moved after the others, in
    one canonical order (their JSON text), so that where the agent sent them does not count."""
    if not kinds:
        return list(frames)
    wanted = set(kinds)
    kept = [f for f in frames if _update_kind(f) not in wanted]
    moved = [f for f in frames if _update_kind(f) in wanted]
    moved.sort(key=lambda f: json.dumps(f, sort_keys=True, ensure_ascii=False))
    return kept + moved


# --- the clock ----------------------------------------------------------------------------------


class ClockUnavailableError(RuntimeError):
    """``clock:`` is set but libfaketime is not installed."""


# Where Debian/Ubuntu (multiarch), Fedora and a source build put libfaketime's thread-safe
# build; the agents we run (node, Python with threads) need that one.
_LIBRARY_GLOBS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib64/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
)


def faketime_library() -> Path:
    """libfaketime's thread-safe build.

    Raises:
        ClockUnavailableError: it is not installed.
    """
    for pattern in _LIBRARY_GLOBS:
        found = sorted(Path("/").glob(pattern.lstrip("/")))
        if found:
            return found[0]
    raise ClockUnavailableError(
        "snapshot.yml sets clock:, which runs the agent under libfaketime: install it "
        "(Debian/Ubuntu: apt-get install faketime)"
    )


def clock_command(clock: str | None, argv: Sequence[str]) -> list[str]:
    """``argv`` started at the fixed time ``clock`` (the clock runs on from there), in UTC;
    ``argv`` itself when no clock is set.

    libfaketime is preloaded by ``env`` *inside* whatever sandbox wraps the command: preloaded
    into the wrapper, it would set up shared memory the confined agent may not open, and an
    environment allow-list could drop it. Monotonic time is left real (a faked monotonic
    clock stalls event loops' timers).

    Raises:
        ClockUnavailableError: libfaketime is not installed.
    """
    if clock is None:
        return list(argv)
    settings = {
        "LD_PRELOAD": str(faketime_library()),
        "FAKETIME": f"@{clock}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "TZ": "UTC",
    }
    # -u FAKETIME_SHARED: a gate itself run under the faketime wrapper (a CI trick) must not
    # hand the agent that wrapper's shared memory, which the sandbox does not let it open.
    # Absolute PATH entries only: a relative one would find `env` in the run's cwd, where the
    # scenario's workspace is, and our own (cold) agent is started unconfined.
    env = host_which("env") or "/usr/bin/env"
    return [env, "-u", "FAKETIME_SHARED", *(f"{k}={v}" for k, v in settings.items()), *argv]
