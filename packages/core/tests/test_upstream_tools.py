"""Upstream's June ``tools`` specs (``tools.spec.ts``, ``properties.spec.ts``) as conformance
cases.

Upstream has a tool registry and a schema DSL (``defineTool``) that validates the model's
arguments with ``validateArgs``; ours has the agent's tool table (``Agent.tools``), JSON
Schema ``ToolSpec.parameters`` and :func:`dsh_core.validate_arguments`, which a tool calls
itself (as upstream's ``defineTool`` tools are checked and raw ones are not). Execution cases
run through ``Agent`` (``profile="june"``) and read the ``tool/result`` it logs. The
``validateArgs`` specs are written here as the JSON Schema upstream's converter emits for them.
Ledger: COMPATIBILITY.md § "Upstream unit tests".
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentConfig,
    Chunk,
    CreateOptions,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    validate_arguments,
)
from dsh_core.testing import InMemorySessionStore, ScriptedModel

pytestmark = pytest.mark.anyio

JUNE = AgentConfig(profile="june")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Tool:
    """A tool with a JSON Schema; ``checked`` tools validate like upstream's ``defineTool``."""

    def __init__(
        self,
        name: str,
        parameters: Mapping[str, Any],
        answer: Any = None,
        checked: bool = False,
    ) -> None:
        self.spec = ToolSpec(name=name, description=f"{name} tool", parameters=dict(parameters))
        self.answer = answer
        self.checked = checked
        self.runs = 0

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        if self.checked and (violations := validate_arguments(self.spec["parameters"], arguments)):
            error = {"name": "ToolArgsError", "code": "INVALID_ARGS"}
            return ToolOutcome(f"Error: invalid arguments: {'; '.join(violations)}", True, error)
        self.runs += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return ToolOutcome(self.answer if self.answer is not None else str(arguments.get("text")))


class _Coded(Exception):
    """Upstream's ``HarnessError``: an exception with a stable ``code``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


_ECHO_PARAMETERS = {"type": "object", "properties": {"text": {"type": "string"}}}
_READER_PARAMETERS = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}


def _call(name: str, arguments: str) -> list[Chunk]:
    return [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": "c1", "name": name, "arguments": arguments},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


_DONE: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "done"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


async def _execute(tools: Sequence[Any], name: str, arguments: str) -> dict[str, Any]:
    """One call through the agent; the logged ``tool/result``."""
    store = InMemorySessionStore()
    agent = Agent(ScriptedModel([[_call(name, arguments), _DONE]]), store, list(tools), JUNE)
    session = store.create(CreateOptions())
    await agent.run_turn(session, "go")
    [result] = [event.data for event in session.events if event.type == "tool/result"]
    return result


def _text(result: Mapping[str, Any]) -> str:
    return result["content"][0]["text"]


# --- tools.spec.ts: ToolRegistry ------------------------------------------------------------------


async def test_registry_exposes_schemas_with_only_the_model_facing_fields() -> None:
    # "registers tools, exposes schemas" and "schemas() drops the UI presentation callbacks"
    store = InMemorySessionStore()
    model = ScriptedModel([[_DONE]])
    echo = _Tool("echo", _ECHO_PARAMETERS)
    await Agent(model, store, [echo], JUNE).run_turn(store.create(CreateOptions()), "go")
    [request] = model.requests
    assert request.tools == [
        {"name": "echo", "description": "echo tool", "parameters": _ECHO_PARAMETERS}
    ]
    assert sorted(request.tools[0]) == ["description", "name", "parameters"]


@pytest.mark.parametrize(
    ("tool", "name", "arguments", "expected"),
    [
        # executes a tool and returns its content
        (_Tool("echo", _ECHO_PARAMETERS), "echo", '{"text": "hi"}', (False, "hi", None)),
        # returns isError results for unknown tools …
        (
            _Tool("boom", {}, RuntimeError("exploded")),
            "nope",
            "{}",
            (
                True,
                'Error: unknown tool "nope"',
                {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"},
            ),
        ),
        # … and throwing tools; a plain throw has no structured error (only the text)
        (
            _Tool("boom", {}, RuntimeError("exploded")),
            "boom",
            "{}",
            (True, "Error: exploded", None),
        ),
        # a tool throwing a HarnessError surfaces its name and code
        (
            _Tool("coded", {}, _Coded("disk full", "ENOSPC")),
            "coded",
            "{}",
            (True, "Error: disk full", {"name": "_Coded", "code": "ENOSPC"}),
        ),
        # still accepts raw JSON-Schema tools directly (MCP interop)
        (
            _Tool("raw", _READER_PARAMETERS, "/tmp"),
            "raw",
            '{"path": "/tmp"}',
            (False, "/tmp", None),
        ),
    ],
)
async def test_registry_execution_results(
    tool: _Tool, name: str, arguments: str, expected: tuple[bool, str, Any]
) -> None:
    result = await _execute([tool], name, arguments)
    assert (result["isError"], _text(result), result.get("error")) == expected


def test_registry_rejects_duplicate_names_and_gets_tools_by_name() -> None:
    echo = _Tool("echo", _ECHO_PARAMETERS)
    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        Agent(ScriptedModel(), InMemorySessionStore(), [echo, _Tool("echo", {})])
    agent = Agent(ScriptedModel(), InMemorySessionStore(), [echo])
    assert agent.tools.get("echo") is echo
    assert agent.tools.get("nope") is None


# --- tools.spec.ts: validateArgs ------------------------------------------------------------------

_EMPTY: dict[str, Any] = {}
_PATH_LIMIT = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "number"}},
    "required": ["path"],
}
_PRIMITIVES = {
    "type": "object",
    "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "b": {"type": "boolean"}},
}
_COLOR = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green"]}}}
_NESTED = {
    "type": "object",
    "properties": {
        "config": {
            "type": "object",
            "properties": {"host": {"type": "string"}, "port": {"type": "number"}},
            "required": ["host"],
        },
        "bag": {"type": "object"},
    },
    "required": ["config"],
}
_ARRAYS = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string"}},
        "raw": {"type": "array"},
    },
}
_SERVERS = {
    "type": "object",
    "properties": {
        "servers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"host": {"type": "string"}},
                "required": ["host"],
            },
        }
    },
}


@pytest.mark.parametrize(
    ("schema", "arguments", "violations"),
    [
        # returns [] for valid args and is total over malformed input
        (_PATH_LIMIT, {"path": "/tmp"}, []),
        (_PATH_LIMIT, {"path": "/tmp", "limit": 5}, []),
        (_PATH_LIMIT, None, ['"arguments" must be an object']),
        (_PATH_LIMIT, "nope", ['"arguments" must be an object']),
        (_PATH_LIMIT, [], ['"arguments" must be an object']),
        # flags a missing required key
        (_READER_PARAMETERS, {}, ['missing required property "path"']),
        # allows extra keys and omitted optionals
        (_READER_PARAMETERS, {"path": "/tmp", "extra": 1}, []),
        # does not apply defaults (validation only)
        ({"type": "object", "properties": {"limit": {"type": "number", "default": 25}}}, {}, []),
        # type-checks primitives
        (_PRIMITIVES, {"s": 1}, ['"s" must be a string']),
        (_PRIMITIVES, {"n": "x"}, ['"n" must be a number']),
        (_PRIMITIVES, {"n": True}, ['"n" must be a number']),
        (_PRIMITIVES, {"b": "x"}, ['"b" must be a boolean']),
        # checks enum membership
        (_COLOR, {"color": "red"}, []),
        (_COLOR, {"color": "blue"}, ['"color" must be one of ["red","green"]']),
        # checks enum uniformly with the converter (enum on a non-string prop)
        (
            {"type": "object", "properties": {"n": {"type": "number", "enum": ["1", "2"]}}},
            {"n": 1},
            ['"n" must be one of ["1","2"]'],
        ),
        # recurses into nested objects (and an object without properties only type-checks)
        (_NESTED, {"config": {"host": "h"}, "bag": {"anything": True}}, []),
        (
            _NESTED,
            {"config": {"port": 9}, "bag": 5},
            ['missing required property "config.host"', '"bag" must be an object'],
        ),
        # recurses into array items (and an array without items only type-checks)
        (_ARRAYS, {"tags": ["a", "b"], "raw": [1, _EMPTY, "x"]}, []),
        (_ARRAYS, {"tags": ["a", 2]}, ['"tags[1]" must be a string']),
        (_ARRAYS, {"tags": "nope"}, ['"tags" must be an array']),
        # validates arrays of objects element-wise
        (
            _SERVERS,
            {"servers": [{"host": "a"}, {}]},
            ['missing required property "servers[1].host"'],
        ),
    ],
)
def test_validate_arguments(schema: dict[str, Any], arguments: Any, violations: list[str]) -> None:
    assert validate_arguments(schema, arguments) == violations


def test_validate_arguments_rejects_an_unknown_type_as_a_schema_bug() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "weird"}}}
    with pytest.raises(ValueError, match=r"unreachable variant.*validate_arguments"):
        validate_arguments(schema, {"x": 1})


# --- tools.spec.ts: defineTool validation ---------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        # an isError result with the violations, and the structured error on the result
        (
            _Tool("reader", _READER_PARAMETERS, checked=True),
            "{}",
            (
                True,
                'Error: invalid arguments: missing required property "path"',
                {"name": "ToolArgsError", "code": "INVALID_ARGS"},
            ),
        ),
        # runs normally when the arguments are valid
        (
            _Tool("reader", _READER_PARAMETERS, "read /x", checked=True),
            '{"path": "/x"}',
            (False, "read /x", None),
        ),
        # raw tools are not validated by the harness (they keep their own check)
        (_Tool("reader", _READER_PARAMETERS, "ran"), "{}", (False, "ran", None)),
    ],
)
async def test_define_tool_validation(
    tool: _Tool, arguments: str, expected: tuple[bool, str, Any]
) -> None:
    result = await _execute([tool], "reader", arguments)
    assert (result["isError"], _text(result), result.get("error")) == expected
    assert tool.runs == (0 if expected[0] else 1)


# --- properties.spec.ts (generated, seeded) -------------------------------------------------------


def _prop(rng: random.Random, depth: int) -> dict[str, Any]:
    roll = rng.randrange(5 if depth > 0 else 3)
    if roll == 3:
        return _spec(rng, depth - 1)
    if roll == 4:
        return {"type": "array", "items": _prop(rng, depth - 1)}
    kind = ("string", "number", "boolean")[roll]
    if kind == "string" and rng.random() < 0.3:
        return {"type": "string", "enum": [f"v{n}" for n in range(rng.randint(1, 3))]}
    return {"type": kind}


def _spec(rng: random.Random, depth: int) -> dict[str, Any]:
    keys = [f"k{n}" for n in range(rng.randint(0, 4))]
    properties = {key: _prop(rng, depth) for key in keys}
    return {
        "type": "object",
        "properties": properties,
        "required": [key for key in keys if rng.random() < 0.5],
    }


def _valid(rng: random.Random, prop: Mapping[str, Any]) -> Any:
    kind = prop["type"]
    if kind == "object":
        required = set(prop.get("required", ()))
        return {
            key: _valid(rng, sub)
            for key, sub in prop.get("properties", {}).items()
            if key in required or rng.random() < 0.5
        }
    if kind == "array":
        return [_valid(rng, prop["items"]) for _ in range(rng.randint(0, 3))]
    if "enum" in prop:
        return rng.choice(prop["enum"])
    return {"string": "s", "number": rng.uniform(-1e6, 1e6), "boolean": rng.random() < 0.5}[kind]


_CASES = [(seed, _spec(random.Random(seed), 2)) for seed in range(200)]


@pytest.mark.parametrize(
    "junk", [None, 0, 1.5, True, "x", [], [{}], {"k0": object()}, {"k0": [None, {"k0": 1}]}]
)
def test_properties_validation_is_total(junk: Any) -> None:
    for _, schema in _CASES:
        assert isinstance(validate_arguments(schema, junk), list)


def test_properties_arguments_satisfying_the_schema_pass() -> None:
    for seed, schema in _CASES:
        arguments = _valid(random.Random(seed), schema)
        assert validate_arguments(schema, arguments) == [], (schema, arguments)


def test_properties_dropping_a_required_key_is_always_rejected() -> None:
    checked = 0
    for seed, schema in _CASES:
        arguments = _valid(random.Random(seed), schema)
        for key in schema["required"]:
            dropped = {k: v for k, v in arguments.items() if k != key}
            assert f'missing required property "{key}"' in validate_arguments(schema, dropped)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("top", [None, 1, "s", True, [], [1]])
def test_properties_a_non_object_top_level_is_always_rejected(top: Any) -> None:
    for _, schema in _CASES:
        assert validate_arguments(schema, top) == ['"arguments" must be an object']
