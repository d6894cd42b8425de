"""The failure diff names the first differing file, line and field."""

from __future__ import annotations

from dsh_snapshot import first_difference


def test_equal_fixtures_have_no_difference() -> None:
    rows = [{"a": 1}, {"b": [1, 2]}]
    assert first_difference("f.jsonl", rows, [{"a": 1}, {"b": [1, 2]}]) is None


def test_names_line_and_nested_field() -> None:
    exp = [{"type": "session"}, {"data": {"chunk": {"text": "PONG"}}}]
    act = [{"type": "session"}, {"data": {"chunk": {"text": "PING"}}}]
    diff = first_difference("session.1.jsonl", exp, act)
    assert diff is not None
    assert (diff.file, diff.line, diff.field) == ("session.1.jsonl", 2, "data.chunk.text")
    assert (
        str(diff) == 'session.1.jsonl line 2, field data.chunk.text: expected "PONG", actual "PING"'
    )


def test_list_items_and_missing_fields() -> None:
    diff = first_difference("s", [{"c": [{"t": 1}, {"t": 2}]}], [{"c": [{"t": 1}, {"u": 2}]}])
    assert diff is not None
    assert diff.field == "c[1].t"
    assert "field missing" in str(diff)
    extra = first_difference("s", [{"a": 1}], [{"a": 1, "z": 2}])
    assert extra is not None
    assert extra.field == "z"
    assert "unexpected field" in str(extra)


def test_type_change_is_a_difference() -> None:
    diff = first_difference("s", [{"a": 1}], [{"a": "1"}])
    assert diff is not None
    assert str(diff) == 's line 1, field a: expected 1, actual "1"'


def test_missing_and_extra_lines() -> None:
    short = first_difference("stdout.expected.jsonl", [{"a": 1}, {"b": 2}], [{"a": 1}])
    assert short is not None
    assert short.line == 2
    assert "line missing in actual (expected 2 lines, actual 1)" in str(short)
    long = first_difference("stdout.expected.jsonl", [{"a": 1}], [{"a": 1}, {"b": 2}])
    assert long is not None
    assert long.line == 2
    assert "extra line in actual" in str(long)


def test_long_texts_show_where_they_differ_on_both_sides() -> None:
    prompt = "You are a helpful agent. " * 800  # a 20 KB system prompt
    exp = [{"params": {"text": prompt + "Today is 2026-01-15."}}]
    act = [{"params": {"text": prompt + "Today is 2026-01-16."}}]
    diff = first_difference("stdout.expected.jsonl", exp, act)
    assert diff is not None
    text = str(diff)
    expected, actual = text.split("expected ", 1)[1].split(", actual ")
    assert "2026-01-15" in expected
    assert "2026-01-16" in actual
    assert f"(char {len(prompt) + len('Today is 2026-01-1')})" in actual
    assert len(text) < 600
