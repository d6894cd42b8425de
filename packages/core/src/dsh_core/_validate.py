"""Upstream's runtime argument check (``validateArgs`` of ``packages/core/tools``), over the
JSON Schema a tool's ``ToolSpec.parameters`` already is."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

__all__ = ["validate_arguments"]

_TYPE_NAMES = {"string": "a string", "number": "a number", "boolean": "a boolean"}


def validate_arguments(parameters: Mapping[str, Any], arguments: object) -> list[str]:
    """What is wrong with ``arguments`` against the object schema ``parameters``.

    Upstream's semantics and wording: the top level must be an object; a key in ``required``
    must be present; extra keys are allowed; ``default`` is not applied; ``string``,
    ``number`` (JSON numbers, never booleans) and ``boolean`` are type-checked, then ``enum``
    membership; an ``object`` without ``properties`` or an ``array`` without ``items`` is only
    type-checked; nested objects and array items are checked with dotted and indexed paths.

    Args:
        parameters: a JSON Schema ``{"type": "object", "properties": …, "required": …}``.
        arguments: the model's parsed arguments, of any shape.

    Returns:
        The violations, in schema order; empty when the arguments are valid.

    Raises:
        ValueError: a property has a ``type`` this check does not know (a schema bug, not
            the model's).
    """
    return _check_object(parameters, arguments, "")


def _check_object(schema: Mapping[str, Any], value: object, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f'"{path or "arguments"}" must be an object']
    fields = cast(dict[str, Any], value)
    properties = cast(Mapping[str, Mapping[str, Any]], schema.get("properties") or {})
    required = set(cast(Sequence[str], schema.get("required") or ()))
    violations: list[str] = []
    for key, prop in properties.items():
        key_path = f"{path}.{key}" if path else key
        if key not in fields:
            if key in required:
                violations.append(f'missing required property "{key_path}"')
            continue
        violations.extend(_check_value(prop, fields[key], key_path))
    return violations


def _check_value(prop: Mapping[str, Any], value: object, path: str) -> list[str]:
    kind = prop.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f'"{path}" must be an object']
        return _check_object(prop, cast(object, value), path) if "properties" in prop else []
    if kind == "array":
        if not isinstance(value, list):
            return [f'"{path}" must be an array']
        items = prop.get("items")
        if items is None:
            return []
        elements = cast(list[object], value)
        item_schema = cast(Mapping[str, Any], items)
        return [
            violation
            for index, element in enumerate(elements)
            for violation in _check_value(item_schema, element, f"{path}[{index}]")
        ]
    if kind not in _TYPE_NAMES:
        raise ValueError(f"unreachable variant: property type {kind!r} in validate_arguments")
    is_bool = isinstance(value, bool)
    fits = {
        "string": isinstance(value, str),
        "number": isinstance(value, (int, float)) and not is_bool,
        "boolean": is_bool,
    }[kind]
    if not fits:
        return [f'"{path}" must be {_TYPE_NAMES[kind]}']
    allowed = prop.get("enum")
    # enum values are strings (upstream's converter emits them so): a number never matches.
    if allowed is not None and not any(
        type(option) is type(value) and option == value for option in cast(list[object], allowed)
    ):
        return [f'"{path}" must be one of {json.dumps(allowed, separators=(",", ":"))}']
    return []
