"""The strict ``input.json`` of our own scenarios: one model per op, unknown keys refused.

An upstream folder is read leniently (its later harness has ops and fields we do not drive,
reported as needs); a folder with ``snapshot.yml`` is ours, so a misspelt key (``"timout"``,
``"cwdd"``) or op is a mistake, refused naming the file and the field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["InputDocument", "STRICT_STEP_MODELS"]


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class InitializeStep(_Op):
    """``initialize``: the ACP handshake; ``terminalOutput`` asks for terminal output blocks."""

    op: Literal["initialize"]
    terminalOutput: bool = False


class NewSessionStep(_Op):
    """``newSession``: open the session the following prompts go to."""

    op: Literal["newSession"]


class NewSessionExpectErrorStep(_Op):
    """``newSessionExpectError``: a ``session/new`` the agent must refuse."""

    op: Literal["newSessionExpectError"]
    additionalDirectories: list[str] | None = None


class LoadSessionStep(_Op):
    """``loadSession``: reopen the session from its stored log (``session/load``)."""

    op: Literal["loadSession"]


class PromptStep(_Op):
    """``prompt``: send ``text`` and wait for the turn to end."""

    op: Literal["prompt"]
    text: str


class PromptExpectErrorStep(_Op):
    """``promptExpectError``: send ``text``; the prompt must fail."""

    op: Literal["promptExpectError"]
    text: str


class PromptAndCancelStep(_Op):
    """``promptAndCancel``: send ``text``, cancel once the turn streams."""

    op: Literal["promptAndCancel"]
    text: str


class CancelStep(_Op):
    """``cancel``: send ``session/cancel`` with no turn running."""

    op: Literal["cancel"]


STRICT_STEP_MODELS: tuple[type[_Op], ...] = (
    InitializeStep,
    NewSessionStep,
    NewSessionExpectErrorStep,
    LoadSessionStep,
    PromptStep,
    PromptExpectErrorStep,
    PromptAndCancelStep,
    CancelStep,
)

_AnyStep = Annotated[
    InitializeStep
    | NewSessionStep
    | NewSessionExpectErrorStep
    | LoadSessionStep
    | PromptStep
    | PromptExpectErrorStep
    | PromptAndCancelStep
    | CancelStep,
    Field(discriminator="op"),
]


class InputDocument(BaseModel):
    """``input.json`` of a scenario of ours: the steps the runner drives, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="dsh-snapshot input.json")

    steps: list[_AnyStep] = Field(min_length=1)
