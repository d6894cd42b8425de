"""The op registry: every ``input.json`` op declared once, with its model, driver and prompt flag.

One :meth:`OpRegistry.register` call is the whole of an op. From the registry derive the strict
``input.json`` model (:meth:`OpRegistry.input_document`, and so its JSON Schema), the fields the
needs check knows (:attr:`OpRegistry.fields`), the ops that send a prompt
(:attr:`OpRegistry.prompt_ops`, which ``expect:`` counts) and the runner's dispatch
(:meth:`OpRegistry.drive`) — as pytest derives its hook tables from one ``hookspec`` module.

An upstream folder is read leniently (its later harness has ops and fields we do not drive,
reported as needs); a folder with ``snapshot.yml`` is ours, so a misspelt key (``"timout"``,
``"cwdd"``) or op is a mistake, refused naming the file and the field.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeVar, Union, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from dsh_core import DshError

if TYPE_CHECKING:
    from dsh_acp_agent.testing import AgentProcess as AcpProcess

__all__ = [
    "OPS",
    "AgentError",
    "Op",
    "OpRegistry",
    "StepDriver",
    "StrictStep",
]


class AgentError(DshError):
    """The agent misbehaved: a timeout, a bad frame, an unexpected response, a bad exit."""


class StrictStep(BaseModel):
    """The base of an op's strict model: ``op: Literal["name"]`` plus its own fields, by their
    ``input.json`` names; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class StepDriver(Protocol):
    """What an op's driver works with: the agent's JSON-RPC peer, the run's cwd, the session."""

    @property
    def acp(self) -> AcpProcess:
        """The agent process and its JSON-RPC transport."""
        ...

    @property
    def cwd(self) -> Path:
        """The run's working directory (where sessions are opened)."""
        ...

    def session(self, op: str) -> str:
        """The id of the last session opened; raises :class:`AgentError` naming ``op`` when
        none is."""
        ...


M = TypeVar("M", bound=StrictStep)


@dataclass(frozen=True, slots=True)
class Op:
    """One registered op.

    Attributes:
        name: the ``op`` value in ``input.json``.
        model: its strict model (a :class:`StrictStep` with ``op: Literal[name]``).
        drive: sends the step to the agent and checks the answer; raises :class:`AgentError`.
        prompts: the step sends a prompt (``text``); ``expect:`` counts these.
    """

    name: str
    model: type[StrictStep]
    drive: Callable[[StepDriver, Any], None]
    prompts: bool

    @property
    def fields(self) -> frozenset[str]:
        """The step's fields besides ``op``, by their ``input.json`` names."""
        return frozenset(
            info.alias or name for name, info in self.model.model_fields.items() if name != "op"
        )


def _op_name(model: type[StrictStep]) -> str:
    info = model.model_fields.get("op")
    args: tuple[Any, ...] = getattr(info.annotation, "__args__", ()) if info else ()
    if info is None or len(args) != 1 or not isinstance(args[0], str):
        raise TypeError(f"{model.__name__} needs a field op: Literal['<name>'] naming its op")
    return args[0]


class OpRegistry:
    """The ops this runner drives, by name, in registration order (the schema's order)."""

    def __init__(self) -> None:
        self._ops: dict[str, Op] = {}
        self._document: type[BaseModel] | None = None
        self._lock = threading.Lock()

    def register(
        self, model: type[M], drive: Callable[[StepDriver, M], None], *, prompts: bool = False
    ) -> Op:
        """Declare an op: its strict model (whose ``op`` literal names it), the driver that
        runs it, and whether it sends a prompt. Returns the registration.

        Raises:
            TypeError: the model has no ``op`` literal; a prompting op has no ``text`` field, or
                another op has one.
            ValueError: an op of that name is already registered.
        """
        name = _op_name(model)
        # A step's ``text`` is its prompt, and only a prompting step has one: expect: counts
        # prompts by it, and the scripted library (which knows no registry) reads it.
        if prompts and "text" not in model.model_fields:
            raise TypeError(f"op {name} prompts, so its model needs a field text: str")
        if not prompts and "text" in model.model_fields:
            raise TypeError(f"op {name} has a field text, which only a prompting op has")
        op = Op(name, model, cast(Callable[[StepDriver, Any], None], drive), prompts)
        with self._lock:
            if name in self._ops:
                raise ValueError(f"op {name} is already registered")
            self._ops[name] = op
            self._document = None
        return op

    def unregister(self, name: str) -> None:
        """Remove an op (a test's own op, once the test is done).

        Raises:
            KeyError: no op of that name is registered.
        """
        with self._lock:
            del self._ops[name]
            self._document = None

    def __iter__(self) -> Iterator[Op]:
        return iter(list(self._ops.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def get(self, name: str) -> Op | None:
        """The op called ``name``, or ``None`` when this runner does not drive it."""
        return self._ops.get(name)

    @property
    def fields(self) -> Mapping[str, frozenset[str]]:
        """op -> the fields it takes besides ``op`` (the needs check's table)."""
        return {op.name: op.fields for op in self}

    @property
    def prompt_ops(self) -> frozenset[str]:
        """The ops that send a prompt."""
        return frozenset(op.name for op in self if op.prompts)

    @property
    def strict_models(self) -> tuple[type[StrictStep], ...]:
        """Every op's strict model, in registration order."""
        return tuple(op.model for op in self)

    def input_document(self) -> type[BaseModel]:
        """The strict ``input.json`` model: ``steps``, a union of every op's model tagged by
        ``op`` (rebuilt after a registration)."""
        with self._lock:
            if self._document is None:
                self._document = _input_document(tuple(op.model for op in self._ops.values()))
            return self._document

    def drive(self, driver: StepDriver, raw: Mapping[str, Any]) -> None:
        """Run one step (as ``input.json`` has it) through its op's driver.

        Raises:
            AgentError: the op is not registered, its fields do not fit its model, or the agent
                answered wrongly.
        """
        name = str(raw.get("op"))
        op = self.get(name)
        if op is None:
            raise AgentError(f"needs op {name}: this runner does not drive it")
        try:
            step = op.model.model_validate(dict(raw))
        except ValidationError as exc:
            raise AgentError(f"op {name}: {json.dumps(dict(raw))} does not fit it: {exc}") from None
        op.drive(driver, step)


def _input_document(models: tuple[type[StrictStep], ...]) -> type[BaseModel]:
    union: Any = Union[models]  # noqa: UP007 - a union built at run time from the registry
    any_step = Annotated[union, Field(discriminator="op")]
    steps: Any = cast(Any, list)[any_step]  # built at run time: not a type expression
    return create_model(
        "InputDocument",
        __config__=ConfigDict(extra="forbid", frozen=True, title="dsh-snapshot input.json"),
        __doc__="``input.json`` of a scenario of ours: the steps the runner drives, in order.",
        steps=(steps, Field(min_length=1)),
    )


OPS = OpRegistry()
"""The registry the runner, the loader, the needs check and the schema read."""


# --- the ops upstream's June snapshot harness drives (``snapshot-harness.ts``), and ours ------


def _expect_error(what: str, response: Mapping[str, Any]) -> None:
    if "error" not in response:
        raise AgentError(
            f"{what} succeeded but an error response was expected: {json.dumps(response)}"
        )


class InitializeStep(StrictStep):
    """``initialize``: the ACP handshake; ``terminalOutput`` asks for terminal output blocks."""

    op: Literal["initialize"]
    terminalOutput: bool = False


def _initialize(d: StepDriver, step: InitializeStep) -> None:
    # The harness's terminalOutput: the client says it renders terminal output.
    d.acp.initialize({"_meta": {"terminal_output": True}} if step.terminalOutput else {})


class NewSessionStep(StrictStep):
    """``newSession``: open the session the following prompts go to."""

    op: Literal["newSession"]


def _new_session(d: StepDriver, step: NewSessionStep) -> None:
    d.acp.new_session(d.cwd)


class NewSessionExpectErrorStep(StrictStep):
    """``newSessionExpectError``: a ``session/new`` the agent must refuse."""

    op: Literal["newSessionExpectError"]
    additionalDirectories: list[str] | None = None


def _new_session_expect_error(d: StepDriver, step: NewSessionExpectErrorStep) -> None:
    extra: dict[str, Any] = {}
    if step.additionalDirectories is not None:
        extra["additionalDirectories"] = step.additionalDirectories
    _expect_error(
        "newSessionExpectError: session/new", d.acp.response(d.acp.send_new_session(d.cwd, **extra))
    )


class LoadSessionStep(StrictStep):
    """``loadSession``: reopen the session from its stored log (``session/load``)."""

    op: Literal["loadSession"]


def _load_session(d: StepDriver, step: LoadSessionStep) -> None:
    d.acp.load_session(d.session(step.op), d.cwd)


class PromptStep(StrictStep):
    """``prompt``: send ``text`` and wait for the turn to end."""

    op: Literal["prompt"]
    text: str


def _prompt(d: StepDriver, step: PromptStep) -> None:
    d.acp.prompt(d.session(step.op), step.text)


class PromptExpectErrorStep(StrictStep):
    """``promptExpectError``: send ``text``; the prompt must fail."""

    op: Literal["promptExpectError"]
    text: str


def _prompt_expect_error(d: StepDriver, step: PromptExpectErrorStep) -> None:
    request = d.acp.send_prompt(d.session(step.op), step.text)
    _expect_error("promptExpectError: session/prompt", d.acp.response(request))


class PromptAndCancelStep(StrictStep):
    """``promptAndCancel``: send ``text``, cancel once the turn streams."""

    op: Literal["promptAndCancel"]
    text: str


def _prompt_and_cancel(d: StepDriver, step: PromptAndCancelStep) -> None:
    session_id = d.session(step.op)
    request_id = d.acp.send_prompt(session_id, step.text)
    # As upstream's harness: cancel once the client has seen streamed message text, so those
    # frames always precede the cancelled response.
    if d.acp.next_update(request_id, "agent_message_chunk") is None:
        raise AgentError(
            "promptAndCancel: the prompt finished before any "
            "agent_message_chunk, so there was nothing to cancel"
        )
    d.acp.notify("session/cancel", {"sessionId": session_id})
    d.acp.result(request_id)


class CancelStep(StrictStep):
    """``cancel``: send ``session/cancel`` with no turn running."""

    op: Literal["cancel"]


def _cancel(d: StepDriver, step: CancelStep) -> None:
    d.acp.notify("session/cancel", {"sessionId": d.session(step.op)})


OPS.register(InitializeStep, _initialize)
OPS.register(NewSessionStep, _new_session)
OPS.register(NewSessionExpectErrorStep, _new_session_expect_error)
OPS.register(LoadSessionStep, _load_session)
OPS.register(PromptStep, _prompt, prompts=True)
OPS.register(PromptExpectErrorStep, _prompt_expect_error, prompts=True)
OPS.register(PromptAndCancelStep, _prompt_and_cancel, prompts=True)
OPS.register(CancelStep, _cancel)
