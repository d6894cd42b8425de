"""What a recording was made with, and what it cost.

Usage comes from the ``usage`` chunks the recording itself holds (a fork child's seeded prefix
is the parent's, so only events after ``seedLength`` count), which makes the totals true for
live, scripted and replayed runs alike. A live record writes them, with the provider, model,
thinking settings, dsh version and date, into ``snapshot.yml`` under ``provenance:``; the rest
of the file, comments included, is kept as it was (the ``recording:`` line is rewritten in
place, the ``provenance:`` block replaced as a whole: comments inside that block are lost).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from dsh_core.plugins import DEFAULT_MODEL_PROVIDER
from dsh_snapshot._expect import json_object, seed_length

__all__ = [
    "Provenance",
    "TokenTotals",
    "Usage",
    "live_provenance",
    "recording_usage",
    "with_provenance",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Model calls and tokens of one recording (or a sum of several)."""

    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    reasoning: int = 0
    errors: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.calls + other.calls,
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.reasoning + other.reasoning,
            self.errors + other.errors,
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def recording_usage(logs: Sequence[Sequence[Any]]) -> Usage:
    """Calls (one per ``finish`` chunk), error finishes and token counts of harvested logs.

    Args:
        logs: each a header row then event rows (normalised or raw).
    """
    total = Usage()
    for log in logs:
        calls = inp = out = cache = reasoning = errors = 0
        for row in log[1 + seed_length(log) :]:
            event = json_object(row)
            if event.get("type") != "assistant/chunk":
                continue
            chunk = json_object(json_object(event.get("data")).get("chunk"))
            if chunk.get("type") == "finish":
                calls += 1
                if json_object(chunk.get("reason")).get("kind") == "error":
                    errors += 1
            elif chunk.get("type") == "usage":
                usage = json_object(chunk.get("usage"))
                inp += _int(usage.get("inputTokens"))
                out += _int(usage.get("outputTokens"))
                cache += _int(usage.get("cacheReadTokens"))
                reasoning += _int(usage.get("reasoningTokens"))
        total = total + Usage(calls, inp, out, cache, reasoning, errors)
    return total


class TokenTotals(BaseModel):
    """Token totals of a recording, as ``snapshot.yml`` keeps them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: int = Field(ge=0)
    input: int = Field(ge=0)
    output: int = Field(ge=0)
    cacheRead: int = Field(ge=0)
    reasoning: int = Field(ge=0)


class Provenance(BaseModel):
    """``provenance:`` of ``snapshot.yml``: what a live recording was made with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    thinking: str | None = None
    reasoningEffort: str | None = None
    dshVersion: str = Field(min_length=1)
    recordedAt: dt.date
    tokens: TokenTotals

    def age_days(self, today: dt.date | None = None) -> int:
        """Whole days since the recording."""
        return ((today or dt.datetime.now(dt.UTC).date()) - self.recordedAt).days


def _setting(settings: object, *names: str) -> str | None:
    for name in names:
        value = getattr(settings, name, None)
        if value is not None:
            return str(getattr(value, "value", value))
    return None


def live_provenance(
    settings: object,
    usage: Usage,
    today: dt.date | None = None,
    *,
    provider: str = DEFAULT_MODEL_PROVIDER,
) -> Provenance:
    """The provenance of a live recording made by ``provider`` (a ``dsh.models`` name) with
    ``settings`` (its settings object: ``model``, ``thinking``, ``reasoning_effort`` are read
    when it has them)."""
    try:
        version = metadata.version("dsh-snapshot")
    except metadata.PackageNotFoundError:  # pragma: no cover - always installed with us
        version = "unknown"
    return Provenance(
        provider=provider,
        model=_setting(settings, "model") or "unknown",
        thinking=_setting(settings, "thinking"),
        reasoningEffort=_setting(settings, "reasoning_effort"),
        dshVersion=version,
        recordedAt=today or dt.datetime.now(dt.UTC).date(),
        tokens=TokenTotals(
            calls=usage.calls,
            input=usage.input,
            output=usage.output,
            cacheRead=usage.cache_read,
            reasoning=usage.reasoning,
        ),
    )


_RECORDING_LINE = re.compile(r"^recording:.*$", re.MULTILINE)
_LOOP_LINE = re.compile(r"^loop:", re.MULTILINE)
_TOP_KEY = re.compile(r"^[A-Za-z_][\w-]*\s*:")


def _drop_block(text: str, key: str) -> str:
    """``text`` without the top-level ``key:`` block (its line and the indented ones after)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        if line.startswith(f"{key}:"):
            inside = True
            continue
        if inside and (_TOP_KEY.match(line) or line.startswith("#")):
            inside = False
        if not inside:
            out.append(line)
    return "".join(out)


def with_provenance(
    text: str, recording: str, provenance: Provenance | None, loop: str | None = None
) -> str:
    """``snapshot.yml`` text with ``recording:`` set and ``provenance:`` replaced (or dropped
    when ``None``: a scripted recording has none); every other line stays as it was.

    ``loop`` is written after ``recording:`` when the file names no loop yet, so a scenario
    that relied on the default says which loop it was recorded with.
    """
    text = _RECORDING_LINE.sub(f"recording: {recording}", text, count=1)
    if loop is not None and not _LOOP_LINE.search(text):
        text = _RECORDING_LINE.sub(f"recording: {recording}\nloop: {loop}", text, count=1)
    text = _drop_block(text, "provenance")
    if provenance is None:
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    block = yaml.safe_dump(
        {"provenance": provenance.model_dump(mode="json", exclude_none=True)},
        sort_keys=False,
        allow_unicode=True,
    )
    return text + block
