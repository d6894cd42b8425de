"""What a recording proxy forwards with its key: a policy, not just a route.

The recording proxy holds the maintainer's key; the agent behind it (a foreign scenario's code,
untrusted: SECURITY.md) writes every request body. Forwarded as written, one run could fire
any number of concurrent calls for the most expensive model with ``n: 64`` and the largest
``max_tokens`` (red team 4 F11). So a :class:`RecordPolicy` is checked on each call *before*
anything is sent upstream, and a call outside it is refused with an HTTP error naming the limit
(the body is never rewritten: a recording must hold what the agent asked):

- ``max_in_flight``: calls of this proxy (route) waiting for or streaming their answer at once;
- ``max_calls``: calls forwarded in this run (refused ones do not count);
- ``n``: absent or 1 (a recording keeps one choice; more multiplies the spend);
- ``max_tokens`` / ``max_completion_tokens``: absent, or an integer at most ``max_tokens``;
- ``model``: when the policy knows the model the user configured, the request's must be it.

Not checked: the prompt's size (bounded by the request body limit, ``_guard``), the upstream's
own default output length when ``max_tokens`` is absent, tools and other sampling fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MAX_CALLS",
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_MAX_TOKENS",
    "PolicyGate",
    "PolicyRefusal",
    "RecordPolicy",
    "Slot",
]

DEFAULT_MAX_IN_FLIGHT = 4
"""Calls one recording answers at once: an agent makes one, a few with sub-agents."""
DEFAULT_MAX_CALLS = 200
"""Calls one recording forwards: a scenario's run makes a handful to a few dozen."""
DEFAULT_MAX_TOKENS = 32768
"""The largest ``max_tokens`` forwarded (a reasoning model's long answer fits)."""


@dataclass(frozen=True, slots=True)
class RecordPolicy:
    """The limits a recording proxy enforces on each call before it spends the key.

    Attributes:
        max_in_flight: calls answered at once (more: HTTP 429 ``max_in_flight``).
        max_calls: calls forwarded in the run (more: HTTP 429 ``max_calls``).
        max_tokens: the ceiling for ``max_tokens`` / ``max_completion_tokens`` (above: 400).
        model: the model the user configured, or ``None``: any model is forwarded.
    """

    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_calls: int = DEFAULT_MAX_CALLS
    max_tokens: int = DEFAULT_MAX_TOKENS
    model: str | None = None

    def __post_init__(self) -> None:
        for name in ("max_in_flight", "max_calls", "max_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"record policy: {name} must be at least 1")

    def body_problem(self, body: Mapping[str, Any]) -> PolicyRefusal | None:
        """Why the request body is outside the policy (``n``, token ceiling, model), if it is."""
        n = body.get("n")
        if n is not None and (type(n) is not int or n != 1):
            return PolicyRefusal(400, "n", f"n must be absent or 1, got {n!r}")
        for name in ("max_tokens", "max_completion_tokens"):
            value = body.get(name)
            if value is None:
                continue
            if type(value) is not int or value > self.max_tokens:
                return PolicyRefusal(
                    400,
                    "max_tokens",
                    f"{name} {value!r} is over the recording's ceiling of {self.max_tokens} "
                    "(max_tokens)",
                )
        model = body.get("model")
        if self.model is not None and model != self.model:
            return PolicyRefusal(
                400,
                "model",
                f"model {model!r} is not the configured live model {self.model!r} (model)",
            )
        return None


@dataclass(frozen=True, slots=True)
class PolicyRefusal:
    """One call the policy refused: the HTTP status, the limit's name, the message."""

    status: int
    limit: str
    message: str

    def __str__(self) -> str:
        return f"record policy refused a model call: {self.message}"


@dataclass(slots=True)
class PolicyGate:
    """A :class:`RecordPolicy` applied to one engine's calls, with its counters.

    Used from the engine's event loop only (no lock). Each admitted call holds a slot until
    :meth:`release` (idempotent through :class:`Slot`).

    Attributes:
        in_flight: admitted calls not yet released.
        calls: calls admitted so far.
        refusals: every refusal so far, in order (the run fails on the first).
    """

    policy: RecordPolicy = field(default_factory=RecordPolicy)
    in_flight: int = 0
    calls: int = 0
    refusals: list[PolicyRefusal] = field(default_factory=list[PolicyRefusal])

    def admit(self, body: Mapping[str, Any]) -> Slot | PolicyRefusal:
        """A slot for the call, or why it is refused (kept in :attr:`refusals`)."""
        policy = self.policy
        refusal = policy.body_problem(body)
        if refusal is None and self.in_flight >= policy.max_in_flight:
            refusal = PolicyRefusal(
                429,
                "max_in_flight",
                f"this recording already has {self.in_flight} model calls in flight "
                f"(max_in_flight {policy.max_in_flight})",
            )
        if refusal is None and self.calls >= policy.max_calls:
            refusal = PolicyRefusal(
                429,
                "max_calls",
                f"this recording already made {self.calls} model calls "
                f"(max_calls {policy.max_calls})",
            )
        if refusal is not None:
            self.refusals.append(refusal)
            return refusal
        self.in_flight += 1
        self.calls += 1
        return Slot(self)


class Slot:
    """One admitted call's place in the :class:`PolicyGate`; :meth:`release` once it ends."""

    __slots__ = ("_gate",)

    def __init__(self, gate: PolicyGate) -> None:
        self._gate: PolicyGate | None = gate

    def release(self) -> None:
        """Free the in-flight place (a second call does nothing)."""
        if self._gate is not None:
            self._gate.in_flight -= 1
            self._gate = None
