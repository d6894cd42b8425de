r"""Scripts of the scripted model server: responses, faults, pauses, and the JSON file format.

A script is a list of responses, one per ``POST /chat/completions`` of a session, in the entry
vocabulary of ``dsh_core``'s script player: a ``ChunksEntry`` (or a bare list of dsh chunks,
optionally with :class:`Pause` markers), a ``ThrowEntry`` (sent as its HTTP status; with
chunks, those then a dropped connection), a
``HangEntry`` (its partial text, then nothing until the server closes), or one of the
HTTP-only :class:`Fault`\ s (``_faults``). The file format is
``{"sessions": [[item, …], …]}`` with each item ``{"chunks": [chunk, …]}`` or
``{"fault": {"kind": "status" | "drop-after" | "slow-first-byte" | "empty" | "raw", …}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dsh_core import Chunk, ChunksEntry, DshError, HangEntry, ScriptEntry, ThrowEntry
from dsh_scripted_server._faults import Fault, Pause

__all__ = [
    "Fault",
    "Pause",
    "Response",
    "ScriptItem",
    "ScriptDocument",
    "ScriptError",
    "load_script_file",
    "validate_script",
]


Response = Sequence[Chunk | Pause] | Fault
"""One answer as the server plays it: a chunk list (optionally with pauses) or a fault."""

ScriptItem = Response | ScriptEntry
"""One answer as a script gives it: a ``Response`` or a ``dsh_core`` script entry."""


class ScriptError(DshError, ValueError):
    """A script (file or ``add_session`` argument) is invalid.

    Attributes:
        source: the file path, or ``"<script>"`` for a script given in Python.
        path: where in the document, e.g. ``sessions[0][2].chunks[3].text``.
        reason: what is wrong there.
    """

    def __init__(self, source: str, path: str, reason: str) -> None:
        self.source = source
        self.path = path
        self.reason = reason
        super().__init__(f"{source}: at {path}: {reason}")


# --- validation models (the chunk union of dsh_core, checked strictly) -----------------------


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


_Index = Field(ge=0)


class _BlockStart(_Model):
    type: Literal["block-start"]
    index: int = _Index
    blockType: Literal["text", "reasoning", "tool-call"]


class _TextDelta(_Model):
    type: Literal["text-delta", "reasoning-delta"]
    index: int = _Index
    text: str


class _ToolCallDelta(_Model):
    type: Literal["tool-call-delta"]
    index: int = _Index
    id: str
    name: str = ""
    argumentsDelta: str


class _BlockEnd(_Model):
    type: Literal["block-end"]
    index: int = _Index
    block: dict[str, Any]


class _TextBlock(_Model):
    type: Literal["text", "reasoning"]
    text: str


class _ToolCallBlock(_Model):
    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str


class _UsageCounts(_Model):
    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    cacheReadTokens: int = Field(ge=0)
    reasoningTokens: int = Field(ge=0)


class _Usage(_Model):
    type: Literal["usage"]
    usage: _UsageCounts


class _Reason(_Model):
    # "aborted" is the agent's own verdict; no finish_reason of the protocol encodes it.
    kind: Literal["stop", "tool-calls", "max-tokens", "error"]


class _Finish(_Model):
    type: Literal["finish"]
    reason: _Reason


_CHUNK_MODELS: dict[str, type[_Model]] = {
    "block-start": _BlockStart,
    "text-delta": _TextDelta,
    "reasoning-delta": _TextDelta,
    "tool-call-delta": _ToolCallDelta,
    "block-end": _BlockEnd,
    "usage": _Usage,
    "finish": _Finish,
}
_BLOCK_MODELS: dict[str, type[_Model]] = {
    "text": _TextBlock,
    "reasoning": _TextBlock,
    "tool-call": _ToolCallBlock,
}


class _StatusFault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["status"]
    status: int = Field(ge=400, le=599)
    retryAfter: float | None = Field(default=None, ge=0)
    message: str | None = None
    body: str | None = None


class _RawFault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["raw"]
    parts: list[str | float]


class _EmptyFault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["empty"]


class _DropFault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["drop-after"]
    after: int = Field(ge=0)
    chunks: list[Any] | None = None


class _SlowFault(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["slow-first-byte"]
    seconds: float = Field(ge=0)
    chunks: list[Any] | None = None


_FAULT_MODELS: dict[str, type[BaseModel]] = {
    "status": _StatusFault,
    "drop-after": _DropFault,
    "slow-first-byte": _SlowFault,
    "empty": _EmptyFault,
    "raw": _RawFault,
}


# --- the whole document, for its JSON Schema (built from the same item models) ------------------

_AnyChunk = Annotated[
    _BlockStart | _TextDelta | _ToolCallDelta | _BlockEnd | _Usage | _Finish,
    Field(discriminator="type"),
]


class _DocDropFault(_DropFault):
    chunks: list[_AnyChunk] | None = None  # pyright: ignore[reportIncompatibleVariableOverride]


class _DocSlowFault(_SlowFault):
    chunks: list[_AnyChunk] | None = None  # pyright: ignore[reportIncompatibleVariableOverride]


class _ChunksItem(_Model):
    chunks: list[_AnyChunk]


class _FaultItem(_Model):
    fault: Annotated[
        _StatusFault | _DocDropFault | _DocSlowFault | _EmptyFault | _RawFault,
        Field(discriminator="kind"),
    ]


class ScriptDocument(BaseModel):
    """``model.script.json``: one script per session (primary first, then each subagent in
    the order it starts), each a list of responses, one per model call. A response is
    ``{"chunks": [chunk, …]}`` or ``{"fault": {"kind": …}}``. :func:`load_script_file` reads
    it; this model describes it (its JSON Schema ships with dsh-snapshot)."""

    model_config = ConfigDict(extra="forbid", title="dsh model.script.json")

    sessions: list[list[_ChunksItem | _FaultItem]]


def _check(model: type[BaseModel], raw: object, source: str, path: str) -> BaseModel:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = path + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ScriptError(source, where, first["msg"] + more) from None


def _tagged(
    table: Mapping[str, type[Any]], raw: object, key: str, source: str, path: str
) -> type[Any]:
    if not isinstance(raw, dict):
        raise ScriptError(source, path, f"expected an object, got {type(raw).__name__}")
    tag = cast(dict[str, Any], raw).get(key)
    model = table.get(tag) if isinstance(tag, str) else None
    if model is None:
        allowed = ", ".join(repr(t) for t in table)
        raise ScriptError(source, f"{path}.{key}", f"got {tag!r}, expected one of {allowed}")
    return model


def validate_chunk(raw: object, source: str, path: str) -> Chunk:
    """Check one JSON chunk against the dsh chunk union; return it as a chunk."""
    _check(_tagged(_CHUNK_MODELS, raw, "type", source, path), raw, source, path)
    chunk = cast(dict[str, Any], raw)
    if chunk["type"] == "block-end":
        block = chunk["block"]
        where = f"{path}.block"
        _check(_tagged(_BLOCK_MODELS, block, "type", source, where), block, source, where)
    return cast(Chunk, chunk)


def validate_chunks(raw: object, source: str, path: str) -> list[Chunk]:
    """Check a JSON chunk list against the dsh chunk union; return it as chunks."""
    if not isinstance(raw, list):
        raise ScriptError(source, path, f"expected an array of chunks, got {type(raw).__name__}")
    return [
        validate_chunk(item, source, f"{path}[{i}]") for i, item in enumerate(cast(list[Any], raw))
    ]


def _from_entry(entry: ScriptEntry, source: str, where: str) -> Response:
    """The HTTP answer that plays ``entry``."""
    if isinstance(entry, ChunksEntry):
        return validate_chunks(list(entry.chunks), source, f"{where}.chunks")
    if isinstance(entry, ThrowEntry):
        if entry.status is None or not 400 <= entry.status <= 599:
            raise ScriptError(
                source,
                where,
                "over HTTP a ThrowEntry is an error status: it needs a 4xx or 5xx status",
            )
        if entry.chunks:
            # A stream cannot change its status once it has started: what streamed first is
            # sent, then the connection drops (the client's mid-stream failure).
            chunks = validate_chunks(list(entry.chunks), source, f"{where}.chunks")
            return Fault.drop_after(sum(c["type"].endswith("-delta") for c in chunks), chunks)
        return Fault.status(entry.status, message=entry.message)
    if entry.ready_file is not None:
        raise ScriptError(
            source, where, "a HangEntry's ready_file is a replay marker; the server has none"
        )
    # Never released: the stream stops after the partial text until the server closes.
    return [*validate_chunks(list(entry.chunks), source, f"{where}.chunks"), Pause()]


def validate_script(
    raw: object, source: str = "<script>", path: str = "responses"
) -> list[Response]:
    """Check one session's script given in Python: entries, chunk lists (with pauses), faults.

    Raises:
        ScriptError: naming the response and chunk that is wrong.
    """
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise ScriptError(source, path, "expected a list of responses")
    out: list[Response] = []
    for i, response in enumerate(cast(Sequence[Any], raw)):
        where = f"{path}[{i}]"
        if isinstance(response, Fault):
            out.append(response)
            continue
        if isinstance(response, ChunksEntry | ThrowEntry | HangEntry):
            out.append(_from_entry(response, source, where))
            continue
        if not isinstance(response, Sequence) or isinstance(response, str | bytes):
            raise ScriptError(source, where, "expected a script entry, a chunk list or a Fault")
        items: list[Chunk | Pause] = []
        for k, item in enumerate(cast(Sequence[Any], response)):
            if isinstance(item, Pause):
                items.append(item)
            else:
                items.append(validate_chunk(item, source, f"{where}[{k}]"))
        out.append(items)
    return out


def _item(raw: object, source: str, path: str) -> Response:
    if not isinstance(raw, dict):
        raise ScriptError(source, path, "expected an object with 'chunks' or 'fault'")
    item = cast(dict[str, Any], raw)
    keys = set(item)
    if keys == {"chunks"}:
        return validate_chunks(item["chunks"], source, f"{path}.chunks")
    if keys != {"fault"}:
        raise ScriptError(
            source, path, f"expected exactly one of 'chunks' or 'fault', got {sorted(keys)}"
        )
    where = f"{path}.fault"
    model = _tagged(_FAULT_MODELS, item["fault"], "kind", source, where)
    fault = _check(model, item["fault"], source, where)
    if isinstance(fault, _StatusFault):
        try:
            return Fault.status(
                fault.status, retry_after=fault.retryAfter, message=fault.message, body=fault.body
            )
        except ValueError as exc:
            raise ScriptError(source, where, str(exc)) from None
    if isinstance(fault, _EmptyFault):
        return Fault.empty()
    if isinstance(fault, _RawFault):
        try:
            return Fault.raw(fault.parts)
        except ValueError as exc:
            raise ScriptError(source, where, str(exc)) from None
    assert isinstance(fault, _DropFault | _SlowFault)
    chunks = (
        None if fault.chunks is None else validate_chunks(fault.chunks, source, f"{where}.chunks")
    )
    if isinstance(fault, _DropFault):
        return Fault.drop_after(fault.after, chunks)
    return Fault.slow_first_byte(fault.seconds, chunks)


def parse_script_document(doc: object, source: str) -> list[list[Response]]:
    """Validate a decoded script document; return one script per session, in order."""
    if not isinstance(doc, dict) or set(cast(dict[str, Any], doc)) != {"sessions"}:
        raise ScriptError(source, "(document)", "expected an object with exactly 'sessions'")
    sessions = cast(dict[str, Any], doc)["sessions"]
    if not isinstance(sessions, list):
        raise ScriptError(source, "sessions", "expected an array of session scripts")
    out: list[list[Response]] = []
    for i, script in enumerate(cast(list[Any], sessions)):
        if not isinstance(script, list):
            raise ScriptError(source, f"sessions[{i}]", "expected an array of responses")
        out.append(
            [_item(r, source, f"sessions[{i}][{k}]") for k, r in enumerate(cast(list[Any], script))]
        )
    return out


def load_script_file(path: str | Path) -> list[list[Response]]:
    """Read and validate a script file.

    Raises:
        ScriptError: the file is not JSON or does not match the format (names the JSON path).
        OSError: the file cannot be read.
    """
    source = str(path)
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ScriptError(source, "(document)", f"not valid JSON: {exc}") from None
    return parse_script_document(doc, source)
