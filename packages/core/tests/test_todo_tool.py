"""``todo_write`` as upstream's ``tool-todo`` (head) behaves: a whole-list snapshot logged as
``todo/write`` in the calling session, its counts as the result, the list rules' refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dsh_core import TodoWriteTool, ToolOutcome
from dsh_core.testing import tool_context


def _run(
    tool: TodoWriteTool, arguments: dict[str, Any], cwd: Path
) -> tuple[ToolOutcome, list[Any]]:
    context = tool_context(cwd, [tool])
    outcome = asyncio.run(tool.run(arguments, context))
    return outcome, [(e.type, e.data) for e in context.session.events]


def test_the_whole_list_is_logged_and_counted(tmp_path: Path) -> None:
    # head/todo-write's call: two tasks in progress at once, one pending
    todos = [
        {"content": "read the code", "status": "in_progress"},
        {"content": " watch the background build ", "status": "in_progress"},
        {"content": "write the fix", "status": "pending"},
    ]
    outcome, events = _run(TodoWriteTool(), {"todos": todos}, tmp_path)
    assert outcome == ToolOutcome("Updated todo list: 1 pending, 2 in progress, 0 completed.")
    assert events == [
        (
            "todo/write",
            {
                "todos": [
                    {"content": "read the code", "status": "in_progress"},
                    {"content": "watch the background build", "status": "in_progress"},
                    {"content": "write the fix", "status": "pending"},
                ]
            },
        )
    ]


def test_an_empty_list_clears_the_plan(tmp_path: Path) -> None:
    outcome, events = _run(TodoWriteTool(), {"todos": []}, tmp_path)
    assert outcome.text == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    assert events == [("todo/write", {"todos": []})]


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        (
            [{"content": "  ", "status": "pending"}],
            "invalid todo: `content` must be a non-empty string",
        ),
        (
            [{"content": "a", "status": "pending"}, {"content": " a", "status": "completed"}],
            'invalid todos: duplicate content "a"',
        ),
        ([{"content": "a", "status": "done"}], '"todos[0].status" must be one of'),
        ([{"content": "a"}], 'missing required property "todos[0].status"'),
        ([{"content": "a", "status": "pending", "owner": "x"}], 'unknown property "owner"'),
        ("a, b", '"todos" must be an array'),
    ],
    ids=["blank", "duplicate", "bad-status", "no-status", "extra-key", "not-a-list"],
)
def test_refused_lists_log_nothing(tmp_path: Path, todos: Any, message: str) -> None:
    outcome, events = _run(TodoWriteTool(), {"todos": todos}, tmp_path)
    assert outcome.is_error
    assert outcome.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert message in outcome.text
    assert events == []


def test_the_single_active_policy_refuses_two_in_progress(tmp_path: Path) -> None:
    tool = TodoWriteTool(allow_parallel_in_progress=False)
    two = [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]
    outcome, events = _run(tool, {"todos": two}, tmp_path)
    assert outcome.text == "Error: invalid todos: at most one task may be in_progress (got 2)"
    assert events == []
    assert "at most one task in_progress" in tool.spec["description"]
    assert "several" in TodoWriteTool().spec["description"]
