"""``replay.override.json``: script the calls chunks alone cannot replay (throws, hangs).

A bare array of entries replaces the primary script; ``{"patches":[{"at":i,"entry":…}]}``
keeps the derived calls and swaps the entry at call index ``i`` (0-based; ``i`` equal to the
derived length appends, e.g. the retry after an injected transient throw).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from dsh_core import Chunk
from dsh_llm_replay._errors import OverrideError
from dsh_llm_replay._ready import ready_file_problem
from dsh_llm_replay._script import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry

__all__ = ["CHUNK_TYPES", "Override", "OverrideDocument", "load_override", "parse_override"]

ChunkType = Literal[
    "block-start",
    "text-delta",
    "reasoning-delta",
    "tool-call-delta",
    "block-end",
    "usage",
    "finish",
]
CHUNK_TYPES: frozenset[str] = frozenset(get_args(ChunkType))


def _check_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    kind = chunk.get("type")
    if kind not in CHUNK_TYPES:
        raise ValueError(f"chunk type {kind!r} is not one of {', '.join(sorted(CHUNK_TYPES))}")
    return chunk


# Only the discriminant of a chunk is checked: the rest is passed to the agent verbatim, as a
# recorded chunk would be.
_ChunkDoc = Annotated[
    dict[str, Any],
    AfterValidator(_check_chunk),
    WithJsonSchema(
        {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"enum": sorted(CHUNK_TYPES)}},
            "description": "a dsh chunk, passed to the agent as a recorded one would be",
        }
    ),
]
_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)


class _ChunksDoc(BaseModel):
    model_config = _STRICT
    kind: Literal["chunks"]
    chunks: list[_ChunkDoc]


class _ThrowDoc(BaseModel):
    model_config = _STRICT
    kind: Literal["throw"]
    chunks: list[_ChunkDoc]
    message: str
    code: str
    status: Annotated[int, Field(ge=100, le=599)] | None = None


class _HangDoc(BaseModel):
    model_config = _STRICT
    kind: Literal["hang"]
    ready_file: str | None = Field(default=None, alias="readyFile", min_length=1)

    @field_validator("ready_file")
    @classmethod
    def _confined(cls, value: str | None) -> str | None:
        problem = None if value is None else ready_file_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


_ENTRY_MODELS: dict[str, type[_ChunksDoc | _ThrowDoc | _HangDoc]] = {
    "chunks": _ChunksDoc,
    "throw": _ThrowDoc,
    "hang": _HangDoc,
}


_EntryDoc = Annotated[_ChunksDoc | _ThrowDoc | _HangDoc, Field(discriminator="kind")]


class _PatchDoc(BaseModel):
    model_config = _STRICT
    at: int = Field(ge=0)
    entry: _EntryDoc


class _PatchesDoc(BaseModel):
    model_config = _STRICT
    patches: list[_PatchDoc]


class OverrideDocument(RootModel[list[_EntryDoc] | _PatchesDoc]):
    """``replay.override.json``: a bare array of entries replacing the primary script, or
    ``{"patches": [{"at": i, "entry": …}]}`` swapping single calls. :func:`load_override`
    reads it (with file-and-path errors); this model describes it for its JSON Schema."""

    model_config = ConfigDict(title="dsh replay.override.json")


@dataclass(frozen=True, slots=True)
class Override:
    """A loaded override document.

    Attributes:
        path: the file it came from.
        replace: the whole script when the document is a bare array, else ``None``.
        patches: ``(at, entry)`` pairs when the document is ``{"patches":…}``, in file order.
    """

    path: str
    replace: tuple[ReplayEntry, ...] | None
    patches: tuple[tuple[int, ReplayEntry], ...] = ()

    def apply(self, derived: Sequence[ReplayEntry]) -> list[ReplayEntry]:
        """Patch a derived script (a replacing override ignores it).

        Raises:
            OverrideError: a patch's ``at`` is past the derived length.
        """
        if self.replace is not None:
            return list(self.replace)
        script = list(derived)
        length = len(script)
        for number, (at, _entry) in enumerate(self.patches):
            if at > length:
                raise OverrideError(
                    self.path,
                    f"patches[{number}].at",
                    f"at {at} is past the derived script, which has {length} "
                    f"entries (at may be at most {length}, which appends)",
                )
        for at, entry in sorted(self.patches, key=lambda patch: patch[0]):
            if at == len(script):
                script.append(entry)
            else:
                script[at] = entry
        return script


def _location(prefix: str, loc: Sequence[int | str]) -> str:
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path or "document"


def _reason(kind: str, message: str, found: object) -> str:
    message = message.removeprefix("Value error, ")
    if kind in {"missing", "extra_forbidden"}:
        return message.lower()
    if kind == "value_error":
        return message
    return f"{message} (found {found!r})"


def _as_chunks(docs: list[dict[str, Any]]) -> tuple[Chunk, ...]:
    # Only the discriminant was checked; the agent takes the rest as a recorded chunk.
    return tuple(cast("list[Chunk]", docs))


def _entry(doc: Any, path: str, prefix: str) -> ReplayEntry:
    if not isinstance(doc, dict):
        raise OverrideError(
            path, prefix or "document", f"an entry must be an object with a kind, found {doc!r}"
        )
    fields: dict[str, Any] = doc  # pyright: ignore[reportUnknownVariableType]
    kind = fields.get("kind")
    model = _ENTRY_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise OverrideError(
            path,
            _location(prefix, ["kind"]),
            f"kind must be one of chunks, throw, hang, found {kind!r}",
        )
    try:
        parsed = model.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise OverrideError(
            path,
            _location(prefix, first["loc"]),
            _reason(first["type"], first["msg"], first["input"]),
        ) from None
    if isinstance(parsed, _ChunksDoc):
        return ChunksEntry(_as_chunks(parsed.chunks))
    if isinstance(parsed, _ThrowDoc):
        return ThrowEntry(_as_chunks(parsed.chunks), parsed.message, parsed.code, parsed.status)
    return HangEntry(parsed.ready_file)


def parse_override(text: str, path: str = "replay.override.json") -> Override:
    """Validate an override document given as text; see :func:`load_override`."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OverrideError(
            path, f"line {exc.lineno}, column {exc.colno}", f"invalid JSON ({exc.msg})"
        ) from None
    if isinstance(doc, list):
        items: list[Any] = doc  # pyright: ignore[reportUnknownVariableType]
        return Override(path, tuple(_entry(item, path, f"[{i}]") for i, item in enumerate(items)))
    if not isinstance(doc, dict):
        raise OverrideError(
            path,
            "document",
            "the document must be an array of entries or an "
            f"object with patches, found {type(doc).__name__}",
        )
    obj: dict[str, Any] = doc  # pyright: ignore[reportUnknownVariableType]
    for key in obj:
        if key != "patches":
            raise OverrideError(path, key, "unknown key; the object form has only patches")
    patches_doc = obj.get("patches")
    if not isinstance(patches_doc, list):
        raise OverrideError(
            path,
            "patches",
            f"patches must be an array of {{at, entry}} objects, found {patches_doc!r}",
        )
    raw_patches: list[Any] = patches_doc  # pyright: ignore[reportUnknownVariableType]
    patches: list[tuple[int, ReplayEntry]] = []
    seen: dict[int, int] = {}
    for number, patch in enumerate(raw_patches):
        where = f"patches[{number}]"
        if not isinstance(patch, dict):
            raise OverrideError(
                path, where, f"a patch must be an object {{at, entry}}, found {patch!r}"
            )
        fields: dict[str, Any] = patch  # pyright: ignore[reportUnknownVariableType]
        for key in fields:
            if key not in {"at", "entry"}:
                raise OverrideError(path, f"{where}.{key}", "unknown key; a patch has at and entry")
        at = fields.get("at")
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise OverrideError(
                path, f"{where}.at", f"at must be a non-negative integer call index, found {at!r}"
            )
        if at in seen:
            raise OverrideError(
                path, f"{where}.at", f"call index {at} is already patched by patches[{seen[at]}]"
            )
        seen[at] = number
        if "entry" not in fields:
            raise OverrideError(path, f"{where}.entry", "field required")
        patches.append((at, _entry(fields["entry"], path, f"{where}.entry")))
    return Override(path, None, tuple(patches))


def load_override(path: Path | str) -> Override:
    """Read and validate a ``replay.override.json``.

    Returns:
        An :class:`Override` that replaces (bare array) or patches (``{"patches":…}``) the
        primary script.

    Raises:
        OverrideError: the file cannot be read or is invalid, naming the file and the JSON
            path of the problem (``replay.override.json: patches[1].at: …``).
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OverrideError(name, "document", f"cannot read the override file ({exc})") from None
    return parse_override(text, name)
