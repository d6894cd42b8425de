"""Loading a scenario's scripts: ordering, and the seedLength slice (the upstream regression)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_core import (
    Chunk,
    Event,
    LogFormatError,
    SessionHeader,
    assistant_chunk,
    render_log,
    step_end,
    step_start,
    turn_end,
    turn_start,
    user_message,
)
from dsh_llm_replay import (
    ChunksEntry,
    ReplayError,
    SessionScript,
    UnterminatedGroupError,
    load_session_scripts,
)


def first_text(script: SessionScript) -> str:
    """The text a script's first replayed call streams."""
    entry = script.entries[0]
    assert isinstance(entry, ChunksEntry)
    return "".join(str(c.get("text", "")) for c in entry.chunks if c["type"] == "text-delta")


def fork_child_first_text(folder: Path, *, seed_slice: bool = True) -> str:
    """What the fork child of a recorded scenario is fed at its first model call."""
    scripts = load_session_scripts(
        folder / "session.jsonl", [folder / "session.1.jsonl"], seed_slice=seed_slice
    )
    child = scripts[1]
    assert child.header.parent_session == scripts[0].header.id
    return first_text(child)


# -- the regression the upstream fixed: a fork child must not replay its parent's answers -----


@pytest.mark.corpus
def test_replay_fork_child_replays_its_own_answer(corpus: Path) -> None:
    assert fork_child_first_text(corpus / "june" / "subagent-fork") == "MARMALADE"


@pytest.mark.corpus
def test_replay_fork_child_with_slice_off_replays_the_parents_answer(corpus: Path) -> None:
    # Proves the test above bites: without the slice the child gets the parent's "OK".
    assert fork_child_first_text(corpus / "june" / "subagent-fork", seed_slice=False) == "OK"


@pytest.mark.corpus
def test_replay_fork_child_script_excludes_the_seeded_prefix(corpus: Path) -> None:
    folder = corpus / "june" / "subagent-fork"
    sliced = load_session_scripts(folder / "session.jsonl", [folder / "session.1.jsonl"])
    whole = load_session_scripts(
        folder / "session.jsonl", [folder / "session.1.jsonl"], seed_slice=False
    )
    assert sliced[1].header.seed_length == 38
    assert len(sliced[1].entries) == 1
    assert len(whole[1].entries) == 2
    assert first_text(whole[1]) == "OK"
    assert whole[1].entries[1] == sliced[1].entries[0]
    # The primary is never sliced.
    assert sliced[0] == whole[0]


@pytest.mark.corpus
def test_replay_head_fork_in_process_child_is_sliced_too(corpus: Path) -> None:
    folder = corpus / "head" / "subagent-fork-in-process"
    assert fork_child_first_text(folder) == "MARMALADE"
    assert fork_child_first_text(folder, seed_slice=False) == "OK"


@pytest.mark.corpus
def test_replay_june_subagent_multi_children_sorted_by_created_at(corpus: Path) -> None:
    folder = corpus / "june" / "subagent-multi"
    scripts = load_session_scripts(
        folder / "session.jsonl", [folder / "session.2.jsonl", folder / "session.1.jsonl"]
    )
    assert [Path(s.source).name for s in scripts] == [
        "session.jsonl",
        "session.1.jsonl",
        "session.2.jsonl",
    ]
    assert scripts[1].header.created_at < scripts[2].header.created_at


# -- synthetic logs ----------------------------------------------------------------------------


def text_call(text: str) -> list[Chunk]:
    return [
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]  # pyright: ignore[reportAssignmentType]


def turn(first_seq: int, number: int, answer: str) -> list[Event]:
    events: list[Event] = [
        turn_start(first_seq, 0, number),
        user_message(first_seq + 1, 0, "q"),
        step_start(first_seq + 2, 0, number, 1),
    ]
    for chunk in text_call(answer):
        events.append(assistant_chunk(first_seq + len(events), 0, number, 1, chunk))
    events.append(step_end(first_seq + len(events), 0, number, 1))
    events.append(turn_end(first_seq + len(events), 0, number, "completed"))
    return events


def write(path: Path, header: SessionHeader, events: list[Event]) -> Path:
    path.write_text(render_log(header, events), encoding="utf-8")
    return path


def test_replay_children_sorted_by_created_at_then_id(tmp_path: Path) -> None:
    primary = write(tmp_path / "p.jsonl", SessionHeader("p", 50), turn(0, 1, "p"))
    kids = [
        write(
            tmp_path / f"{name}.jsonl",
            SessionHeader(name, created, parent_session="p"),
            turn(0, 1, name),
        )
        for name, created in [("zz", 10), ("bb", 20), ("aa", 20), ("yy", 5)]
    ]
    scripts = load_session_scripts(str(primary), kids)
    assert [s.header.id for s in scripts] == ["p", "yy", "zz", "aa", "bb"]
    assert [first_text(s) for s in scripts] == ["p", "yy", "zz", "aa", "bb"]
    assert scripts[1].source == str(tmp_path / "yy.jsonl")


def test_replay_slice_starts_at_seed_length(tmp_path: Path) -> None:
    seed = turn(0, 1, "parent answer")
    own = turn(len(seed), 2, "child answer")
    primary = write(tmp_path / "p.jsonl", SessionHeader("p", 1), seed)
    child = write(
        tmp_path / "c.jsonl",
        SessionHeader("c", 2, parent_session="p", seed_length=len(seed)),
        seed + own,
    )
    on = load_session_scripts(primary, [child])
    off = load_session_scripts(primary, [child], seed_slice=False)
    assert [first_text(s) for s in on] == ["parent answer", "child answer"]
    assert [len(s.entries) for s in off] == [1, 2]
    assert first_text(off[1]) == "parent answer"


def test_replay_seed_slice_cuts_an_unterminated_group_in_the_seed(tmp_path: Path) -> None:
    # A seed whose own last call was cancelled: derivable only once the seed is sliced off.
    seed = [
        turn_start(0, 0, 1),
        step_start(1, 0, 1, 1),
        assistant_chunk(2, 0, 1, 1, {"type": "text-delta", "index": 0, "text": "cut"}),
        step_end(3, 0, 1, 1),
        turn_end(4, 0, 1, "aborted"),
    ]
    primary = write(tmp_path / "p.jsonl", SessionHeader("p", 1), turn(0, 1, "p"))
    child = write(
        tmp_path / "c.jsonl", SessionHeader("c", 2, seed_length=5), seed + turn(5, 2, "mine")
    )
    assert first_text(load_session_scripts(primary, [child])[1]) == "mine"
    with pytest.raises(UnterminatedGroupError, match="turn 1, step 1"):
        load_session_scripts(primary, [child], seed_slice=False)


def test_replay_seed_length_past_the_end_is_an_error(tmp_path: Path) -> None:
    primary = write(tmp_path / "p.jsonl", SessionHeader("p", 1), turn(0, 1, "p"))
    child = write(tmp_path / "c.jsonl", SessionHeader("c", 2, seed_length=99), turn(0, 1, "c"))
    with pytest.raises(ReplayError, match=r"c\.jsonl: seedLength 99 is past the end .* 7 events"):
        load_session_scripts(primary, [child])


def test_replay_missing_log_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match=r"nope\.jsonl: the recorded session log does not exist"):
        load_session_scripts(tmp_path / "nope.jsonl", [])
    primary = write(tmp_path / "p.jsonl", SessionHeader("p", 1), turn(0, 1, "p"))
    with pytest.raises(ReplayError, match=r"kid\.jsonl: the recorded session log does not exist"):
        load_session_scripts(primary, [tmp_path / "kid.jsonl"])
    with pytest.raises(ReplayError, match="cannot read"):
        load_session_scripts(tmp_path, [])


def test_replay_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(
        render_log(SessionHeader("p", 1), turn(0, 1, "p")).encode()
        + b'{"type":"x","data":{"t":"\xff"}}\n'
    )
    with pytest.raises(LogFormatError) as info:
        load_session_scripts(path, [])
    assert (info.value.source, info.value.line) == (str(path), 9)
