"""JSON Schemas of the scenario files, generated from the pydantic models that read them.

``python -m dsh_snapshot.schemas`` rewrites the ``*.schema.json`` files beside this module;
``python -m dsh_snapshot.schemas --check`` exits 1 naming each file that is stale. The files
ship in the wheel so an editor or another tool can validate a scenario without dsh.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dsh_core import ScenarioFiles

__all__ = ["SCHEMA_DIR", "SCHEMA_FILES", "render_schemas", "schema_problems", "write_schemas"]

SCHEMA_DIR = Path(__file__).parent


def _input() -> type[BaseModel]:
    from dsh_snapshot._steps import OPS  # noqa: PLC0415 - import cycle

    return OPS.input_document()


def _meta() -> type[BaseModel]:
    from dsh_snapshot._scenario import SnapshotMeta  # noqa: PLC0415 - import cycle

    return SnapshotMeta


def _script() -> type[BaseModel]:
    from dsh_scripted_server import ScriptDocument  # noqa: PLC0415 - heavy, rarely needed

    return ScriptDocument


def _override() -> type[BaseModel]:
    from dsh_llm_replay import OverrideDocument  # noqa: PLC0415 - heavy, rarely needed

    return OverrideDocument


# scenario file -> (schema file, the model that describes it)
SCHEMA_FILES: dict[str, tuple[str, Callable[[], type[BaseModel]]]] = {
    ScenarioFiles.INPUT: ("input.schema.json", _input),
    ScenarioFiles.META: ("snapshot.schema.json", _meta),
    ScenarioFiles.SCRIPT: ("model.script.schema.json", _script),
    ScenarioFiles.OVERRIDE: ("replay.override.schema.json", _override),
}


def _schema(scenario_file: str, model: type[BaseModel]) -> dict[str, Any]:
    body = model.model_json_schema(mode="validation")
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://github.com/dsh-py/dsh-py/schemas/{SCHEMA_FILES[scenario_file][0]}",
        "description": f"{scenario_file} of a dsh-snapshot scenario folder. "
        + str(body.pop("description", "")).strip(),
    }
    return head | body


def render_schemas() -> dict[str, str]:
    """Schema file name -> its text, freshly generated from the models."""
    return {
        name: json.dumps(_schema(scenario_file, load()), indent=2, sort_keys=True) + "\n"
        for scenario_file, (name, load) in SCHEMA_FILES.items()
    }


def schema_problems(folder: Path = SCHEMA_DIR) -> list[str]:
    """Each schema file in ``folder`` that is missing or differs from the models."""
    problems: list[str] = []
    for name, text in render_schemas().items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{path}: stale (run python -m dsh_snapshot.schemas)")
    return problems


def write_schemas(folder: Path = SCHEMA_DIR) -> list[str]:
    """Write the schemas into ``folder``; return the names whose bytes changed."""
    changed: list[str] = []
    for name, text in render_schemas().items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed
