"""What a scenario needs that this project does not implement.

An upstream recording may drive the agent with a harness op we do not have (the later
``waitForTurnEnd``, ``promptContent`` …), call a tool our agent does not offer (``read``,
``bash_output`` …) or configure a feature we lack (hooks). Such a scenario cannot replay; the
runner reports ``needs op X`` / ``needs tool Y`` for it instead of failing somewhere inside.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from dsh_core import read_log_bytes
from dsh_snapshot._fsafe import read_file
from dsh_snapshot._steps import OPS

__all__ = ["OUR_TOOLS", "recorded_tools", "scenario_needs", "step_needs"]

# The tools dsh-acp-agent offers.
OUR_TOOLS = frozenset({"bash", "subagent", "subagent_fork", "todo_write"})

# Workspace files that configure an upstream feature this project does not implement.
_FEATURE_FILES = {"hooks.json": "hooks", "codex-hooks.json": "hooks"}


def step_needs(steps: Iterable[Mapping[str, Any]]) -> list[str]:
    """``op X`` for each op we do not drive (none registered in
    :data:`~dsh_snapshot._steps.OPS`), ``op X with F`` for a field of a known op we do not
    honour; in first-seen order, without repeats."""
    needs: list[str] = []
    for step in steps:
        op = str(step.get("op"))
        registered = OPS.get(op)
        if registered is None:
            item = f"op {op}"
        else:
            extra = sorted(set(step) - {"op"} - registered.fields)
            if not extra:
                continue
            item = f"op {op} with {', '.join(extra)}"
        if item not in needs:
            needs.append(item)
    return needs


def recorded_tools(session_files: Sequence[Path]) -> set[str]:
    """Every tool name the recorded logs call: ``tool/call`` events and tool-call blocks.

    Raises:
        DshError: a log cannot be read.
    """
    names: set[str] = set()
    for path in session_files:
        log = read_log_bytes(read_file(path), str(path))
        for event in log.events:
            if event.type == "tool/call":
                names.add(str(event.data.get("name")))
            elif event.type == "assistant/chunk":
                chunk = _object(event.data.get("chunk"))
                block = _object(chunk.get("block"))
                if chunk.get("type") == "tool-call-delta" and "name" in chunk:
                    names.add(str(chunk["name"]))
                elif block.get("type") == "tool-call":
                    names.add(str(block.get("name")))
    return names


def scenario_needs(
    steps: Iterable[Mapping[str, Any]], session_files: Sequence[Path], workspace: Path | None
) -> list[str]:
    """Everything a scenario needs that we lack: ops, then tools, then features.

    Raises:
        DshError: a recorded log cannot be read.
    """
    needs = step_needs(steps)
    needs += [f"tool {name}" for name in sorted(recorded_tools(session_files) - OUR_TOOLS)]
    if workspace is not None:
        for name, feature in _FEATURE_FILES.items():
            item = f"{feature} (workspace/{name})"
            if (workspace / name).is_file() and item not in needs:
                needs.append(item)
    return needs


def _object(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}
