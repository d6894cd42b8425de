"""``todo_write``: the model's whole-list plan, as upstream's later agent has it
(``packages/todo/tool-todo`` at head).

Each call sends the complete list, which replaces the previous one: the tool logs it as a
``todo/write {todos}`` event in the calling session (between the call's ``tool/call`` and its
``tool/result``) and answers with the counts. Replaying a log, the latest ``todo/write`` is the
plan. Contents are trimmed, must be non-empty and unique; items carry exactly ``content`` and
``status``. Whether several items may be ``in_progress`` at once is the deployment's choice
(upstream's ``allowParallelInProgress``; head's recordings allow it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from dsh_core._model import ToolSpec
from dsh_core._tools import INVALID_ARGS, ToolContext, ToolOutcome
from dsh_core._validate import validate_arguments

__all__ = ["TODO_STATUSES", "TodoWriteTool"]

TODO_STATUSES = ("pending", "in_progress", "completed")

_ITEM_KEYS = frozenset({"content", "status"})


class _InvalidTodos(ValueError):
    pass


def _todo_list(raw: list[Any], allow_parallel: bool) -> list[dict[str, str]]:
    """The canonical list, in upstream's order of checks and with its texts."""
    todos: list[dict[str, str]] = []
    seen: set[str] = set()
    active = 0
    for index, item in enumerate(raw):
        extra = sorted(set(cast(dict[str, Any], item)) - _ITEM_KEYS)
        if extra:  # the schema's additionalProperties: false
            raise _InvalidTodos(f'"todos[{index}]" has unknown property "{extra[0]}"')
        content = str(item["content"]).strip()
        if not content:
            raise _InvalidTodos("invalid todo: `content` must be a non-empty string")
        if content in seen:
            raise _InvalidTodos(f'invalid todos: duplicate content "{content}"')
        seen.add(content)
        status = str(item["status"])
        active += status == "in_progress"
        todos.append({"content": content, "status": status})
    if not allow_parallel and active > 1:
        raise _InvalidTodos(f"invalid todos: at most one task may be in_progress (got {active})")
    return todos


class TodoWriteTool:
    """The ``todo_write`` tool.

    Args:
        allow_parallel_in_progress: whether several todos may be ``in_progress`` at once
            (the description then asks the model to mark every task being worked on).
    """

    def __init__(self, *, allow_parallel_in_progress: bool = True) -> None:
        self.allow_parallel = allow_parallel_in_progress

    @property
    def spec(self) -> ToolSpec:
        active = (
            "Mark every task you are working on right now as in_progress: several when work "
            "really runs at the same time (subagents, background commands), one when it is "
            "sequential. "
            if self.allow_parallel
            else "Keep at most one task in_progress at a time. "
        )
        return ToolSpec(
            name="todo_write",
            description=(
                "Keep a task list for the current work. Every call sends the WHOLE list and "
                "replaces the previous one; there are no partial updates. Plan multi-step work "
                "with one todo per concrete step before starting, and update it as you go. "
                + active
                + "Mark a task completed as soon as it is done. Skip the list for trivial "
                "one-step requests. Statuses: pending, in_progress, completed."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "description": "The complete task list; it replaces the previous one.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "description": "The task."},
                                "status": {"type": "string", "enum": list(TODO_STATUSES)},
                            },
                            "required": ["content", "status"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["todos"],
                "additionalProperties": False,
            },
        )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        """Log the list as ``todo/write`` in the calling session and return the counts.

        Returns:
            ``Updated todo list: N pending, N in progress, N completed.``; an error outcome
            (nothing logged) for arguments the schema or the list rules refuse.
        """
        violations = validate_arguments(self.spec["parameters"], arguments)
        if violations:
            return ToolOutcome(
                f"Error: invalid arguments: {'; '.join(violations)}", True, INVALID_ARGS
            )
        try:
            todos = _todo_list(cast(list[Any], arguments["todos"]), self.allow_parallel)
        except _InvalidTodos as exc:
            return ToolOutcome(f"Error: {exc}", True, INVALID_ARGS)
        context.session.record("todo/write", {"todos": todos})
        counts = {status: sum(t["status"] == status for t in todos) for status in TODO_STATUSES}
        return ToolOutcome(
            f"Updated todo list: {counts['pending']} pending, {counts['in_progress']} in "
            f"progress, {counts['completed']} completed."
        )
