"""``replay.override.json``: replacing and patching scripts, and every invalid document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Event, SessionHeader, assistant_chunk, render_log, step_end, step_start
from dsh_llm_replay import (
    ChunksEntry,
    HangEntry,
    OverrideError,
    ThrowEntry,
    UnterminatedGroupError,
    load_override,
    load_session_scripts,
    parse_override,
)

FINISH = {"type": "finish", "reason": {"kind": "stop"}}
TEXT = {"type": "text-delta", "index": 0, "text": "hi"}


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def recorded(tmp_path: Path, *answers: str, cut: bool = False) -> Path:
    """A primary log with one call per answer; ``cut`` adds a last call without finish."""
    events: list[Event] = []
    for step, answer in enumerate(answers, 1):
        events.append(step_start(len(events), 0, 1, step))
        for chunk in ({"type": "text-delta", "index": 0, "text": answer}, FINISH):
            events.append(assistant_chunk(len(events), 0, 1, step, chunk))  # pyright: ignore
        events.append(step_end(len(events), 0, 1, step))
    if cut:
        events.append(assistant_chunk(len(events), 0, 2, 1, TEXT))  # pyright: ignore
    path = tmp_path / "session.jsonl"
    path.write_text(render_log(SessionHeader("p", 1), events), encoding="utf-8")
    return path


def answer(entry: object) -> str:
    assert isinstance(entry, ChunksEntry)
    return str(entry.chunks[0].get("text"))


def test_replay_bare_array_replaces_without_deriving(tmp_path: Path) -> None:
    log = recorded(tmp_path, "a", "b", cut=True)  # unterminated: deriving would fail
    override = write_json(
        tmp_path / "replay.override.json",
        [
            {"kind": "chunks", "chunks": [TEXT, FINISH]},
            {"kind": "throw", "chunks": [TEXT], "message": "boom", "code": "AUTH", "status": 401},
            {"kind": "throw", "chunks": [], "message": "no status", "code": "X"},
            {"kind": "hang"},
            {"kind": "hang", "readyFile": ".ready"},
        ],
    )
    [script] = load_session_scripts(log, [], override)
    assert script.entries == (
        ChunksEntry((TEXT, FINISH)),  # pyright: ignore[reportArgumentType]
        ThrowEntry((TEXT,), "boom", "AUTH", 401),  # pyright: ignore[reportArgumentType]
        ThrowEntry((), "no status", "X", None),
        HangEntry(),
        HangEntry(".ready"),
    )
    with pytest.raises(UnterminatedGroupError):
        load_session_scripts(log, [])


def test_replay_patches_swap_and_append(tmp_path: Path) -> None:
    log = recorded(tmp_path, "a", "b", "c")
    override = write_json(
        tmp_path / "o.json",
        {
            "patches": [
                {"at": 3, "entry": {"kind": "chunks", "chunks": [TEXT, FINISH]}},
                {
                    "at": 1,
                    "entry": {
                        "kind": "throw",
                        "chunks": [],
                        "message": "transient",
                        "code": "RATE",
                    },
                },
            ]
        },
    )
    [script] = load_session_scripts(log, [], override)
    assert answer(script.entries[0]) == "a"
    assert script.entries[1] == ThrowEntry((), "transient", "RATE")
    assert answer(script.entries[2]) == "c"
    assert answer(script.entries[3]) == "hi"
    assert len(script.entries) == 4


def test_replay_patches_still_need_a_derivable_log(tmp_path: Path) -> None:
    log = recorded(tmp_path, "a", cut=True)
    override = write_json(tmp_path / "o.json", {"patches": [{"at": 0, "entry": {"kind": "hang"}}]})
    with pytest.raises(UnterminatedGroupError):
        load_session_scripts(log, [], override)


def test_replay_patch_past_the_derived_length_names_the_patch(tmp_path: Path) -> None:
    log = recorded(tmp_path, "a")
    override = write_json(
        tmp_path / "o.json",
        {"patches": [{"at": 1, "entry": {"kind": "hang"}}, {"at": 2, "entry": {"kind": "hang"}}]},
    )
    with pytest.raises(OverrideError) as info:
        load_session_scripts(log, [], override)
    assert info.value.location == "patches[1].at"
    assert str(info.value).startswith(f"{override}: patches[1].at: at 2 is past")


def test_replay_override_applies_to_the_primary_only(tmp_path: Path) -> None:
    primary = recorded(tmp_path, "p")
    child = tmp_path / "child.jsonl"
    child.write_text(primary.read_text().replace('"id":"p"', '"id":"c"'), encoding="utf-8")
    override = write_json(tmp_path / "o.json", [{"kind": "hang"}])
    scripts = load_session_scripts(primary, [child], override)
    assert scripts[0].entries == (HangEntry(),)
    assert answer(scripts[1].entries[0]) == "p"


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("era", "scenario", "expected"),
    [
        ("june", "cancel", HangEntry()),
        (
            "june",
            "error-finish",
            ThrowEntry((), "simulated provider error (HTTP 401)", "AUTH", 401),
        ),
        ("head", "cancel", HangEntry(".dsh-snapshot-stream-ready")),
        ("head", "error-finish", ThrowEntry((), "simulated provider error (HTTP 401)", "AUTH")),
    ],
)
def test_replay_corpus_overrides_script_the_unrecordable_calls(
    corpus: Path, era: str, scenario: str, expected: object
) -> None:
    folder = corpus / era / scenario
    [script] = load_session_scripts(folder / "session.jsonl", [], folder / "replay.override.json")
    assert script.entries == (expected,)


@pytest.mark.corpus
def test_replay_every_head_override_validates(corpus: Path) -> None:
    paths = sorted((corpus / "head").glob("*/replay.override.json"))
    assert paths
    for path in paths:
        assert load_override(path).replace is not None, path


BAD_DOCUMENTS: list[tuple[str, str, str]] = [
    ('{"kind": "hang"', "line 1, column 16", "invalid JSON"),
    ('"hang"', "document", "array of entries or an object with patches"),
    ('[{"kind": "hang"}, {"kind": "sleep"}]', "[1].kind", "one of chunks, throw, hang"),
    ('[{"chunks": []}]', "[0].kind", "found None"),
    ("[7]", "[0]", "an entry must be an object"),
    ('[{"kind": "chunks"}]', "[0].chunks", "field required"),
    (
        '[{"kind": "chunks", "chunks": [{"type": "text-delta"}, {"type": "txt"}]}]',
        "[0].chunks[1]",
        "chunk type 'txt' is not one of",
    ),
    ('[{"kind": "chunks", "chunks": [{"text": "no type"}]}]', "[0].chunks[0]", "chunk type None"),
    ('[{"kind": "chunks", "chunks": {}}]', "[0].chunks", "valid list"),
    ('[{"kind": "throw", "chunks": [], "code": "X"}]', "[0].message", "field required"),
    ('[{"kind": "throw", "chunks": [], "message": "m"}]', "[0].code", "field required"),
    (
        '[{"kind": "throw", "chunks": [], "message": "m", "code": "X", "status": "401"}]',
        "[0].status",
        "valid integer",
    ),
    (
        '[{"kind": "throw", "chunks": [], "message": "m", "code": "X", "status": 42}]',
        "[0].status",
        "greater than or equal to 100",
    ),
    ('[{"kind": "hang", "after": 3}]', "[0].after", "extra inputs are not permitted"),
    ('[{"kind": "hang", "readyFile": ""}]', "[0].readyFile", "at least 1 character"),
    ('[{"kind": "hang", "readyFile": "/etc/x"}]', "[0].readyFile", "is absolute"),
    ('[{"kind": "hang", "readyFile": "~/x"}]', "[0].readyFile", "is absolute"),
    ('[{"kind": "hang", "readyFile": "a/../../x"}]', "[0].readyFile", "climbs out"),
    ('[{"kind": "hang", "readyFile": "a\\u0000b"}]', "[0].readyFile", "NUL"),
    ('{"patches": [{"at": 0, "entry": {"kind": "hang"}}], "mode": "x"}', "mode", "unknown key"),
    ('{"patch": []}', "patch", "unknown key"),
    ('{"patches": {}}', "patches", "must be an array"),
    ('{"patches": [[0]]}', "patches[0]", "a patch must be an object"),
    (
        '{"patches": [{"at": 0, "entry": {"kind": "hang"}}, {"at": -1, "entry": {}}]}',
        "patches[1].at",
        "non-negative integer",
    ),
    (
        '{"patches": [{"at": "1", "entry": {"kind": "hang"}}]}',
        "patches[0].at",
        "non-negative integer",
    ),
    (
        '{"patches": [{"at": true, "entry": {"kind": "hang"}}]}',
        "patches[0].at",
        "non-negative integer",
    ),
    (
        '{"patches": [{"at": 0, "entry": {"kind": "hang"}}, {"at": 0, "entry": {"kind": "hang"}}]}',
        "patches[1].at",
        "already patched by patches[0]",
    ),
    ('{"patches": [{"at": 0}]}', "patches[0].entry", "field required"),
    (
        '{"patches": [{"at": 0, "entry": {"kind": "hang"}, "why": 1}]}',
        "patches[0].why",
        "unknown key",
    ),
    (
        '{"patches": [{"at": 2, "entry": {"kind": "throw", "chunks": [], "message": 5, '
        '"code": "X"}}]}',
        "patches[0].entry.message",
        "valid string",
    ),
    (
        '{"patches": [{"at": 0, "entry": {"kind": "chunks", "chunks": [{"type": "usage"}, 3]}}]}',
        "patches[0].entry.chunks[1]",
        "valid dictionary",
    ),
]


@pytest.mark.parametrize(("text", "location", "reason"), BAD_DOCUMENTS)
def test_replay_invalid_override_names_file_and_json_path(
    tmp_path: Path, text: str, location: str, reason: str
) -> None:
    path = tmp_path / "replay.override.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(OverrideError) as info:
        load_override(path)
    error = info.value
    assert (error.path, error.location) == (str(path), location)
    assert reason.lower() in error.reason.lower()
    assert str(error) == f"{path}: {location}: {error.reason}"


def test_replay_unreadable_override_is_an_override_error(tmp_path: Path) -> None:
    with pytest.raises(OverrideError, match=r"missing\.json: document: cannot read"):
        load_override(tmp_path / "missing.json")
    (tmp_path / "bin.json").write_bytes(b"[\xff]")
    with pytest.raises(OverrideError, match="cannot read"):
        load_override(tmp_path / "bin.json")


def test_replay_parse_override_defaults_its_name() -> None:
    with pytest.raises(OverrideError, match=r"^replay\.override\.json: document: "):
        parse_override("null")
    assert parse_override("[]").replace == ()
    assert parse_override('{"patches": []}').patches == ()
