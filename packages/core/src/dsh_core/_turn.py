"""One running turn of the agent loop: its steps, its tool calls, and how a cancellation closes it.

``Agent.run_turn`` (``dsh_core._agent``) builds a :class:`TurnRun` per turn; everything the turn
has open lives here, so an abort closes exactly that and no more.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dsh_core._events import (
    ContentBlock,
    Event,
    ToolCallBlock,
    TurnEndKind,
    Usage,
    assistant_chunk,
    assistant_message,
    step_end,
    step_start,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)
from dsh_core._loop_profile import (
    EMPTY_RESPONSE_CODE,
    finish_failure,
    is_empty_completion,
)
from dsh_core._messages import session_messages
from dsh_core._model import Delegation, ModelError, ModelRequest
from dsh_core._request_header import (
    RequestHeader,
    header_change,
    request_header,
    request_header_event,
)
from dsh_core._session import Session, now_ms
from dsh_core._tool_schedule import CANCELLED_TEXT, ToolCallSchedule
from dsh_core._tools import (
    INVALID_ARGS,
    UNKNOWN_TOOL,
    ToolContext,
    ToolOutcome,
    is_parallel_safe,
)

if TYPE_CHECKING:
    from dsh_core._agent import Agent

__all__ = ["EventListener", "TurnOutcome", "TurnRun", "next_turn_number"]

EventListener = Callable[[Event], None]
"""Called synchronously with every event the agent records, in order, as it is recorded."""

CANCELLED_BEFORE_DISPATCH_TEXT = "cancelled before dispatch"


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended.

    Attributes:
        turn: the turn number.
        kind: the ``turn/end`` reason kind.
        final_text: the text blocks of the turn's last ``assistant/message``, joined ("" if
            none).
        error: for ``kind == "error"``, what went wrong (``code`` as logged: the model's,
            ``"INTERNAL"`` or ``"STEP_LIMIT"``).
    """

    turn: int
    kind: TurnEndKind
    final_text: str
    error: ModelError | None = None


def next_turn_number(events: Sequence[Event]) -> int:
    """The turn a new ``turn/start`` gets: the last ``turn/start``'s turn + 1 (1 if none)."""
    for event in reversed(events):
        if event.type == "turn/start":
            turn = event.data.get("turn")
            if isinstance(turn, int):
                return turn + 1
    return 1


class _StepFailed(Exception):
    def __init__(self, error: ModelError) -> None:
        super().__init__(error.message)
        self.error = error


class TurnRun:
    """The state of one running turn, so a cancellation can close exactly what is open."""

    def __init__(
        self,
        agent: Agent,
        session: Session,
        listener: EventListener | None,
        delegation: Delegation | None,
    ) -> None:
        self.agent = agent
        self.behaviour = agent.config.behaviour
        self.session = session
        self.listener = listener
        self.delegation = delegation
        self.turn = next_turn_number(session.events)
        self.step = 0
        self.started = False
        self.step_open = False
        self.ended: TurnOutcome | None = None
        self.schedule: ToolCallSchedule | None = None
        self.finish_reason: Mapping[str, Any] = {}
        self.last_content: list[ContentBlock] = []
        self.logged_header: RequestHeader | None = None

    def emit(self, event: Event) -> None:
        self.session.add(event)
        if self.listener is not None:
            self.listener(event)

    def emit_call(self, call: ToolCallBlock) -> None:
        self.emit(
            tool_call(
                self.session.next_seq,
                now_ms(),
                self.turn,
                self.step,
                call["id"],
                call["name"],
                call["arguments"],
            )
        )

    def emit_result(
        self,
        call: ToolCallBlock,
        text: str,
        *,
        is_error: bool,
        error: Mapping[str, str] | None = None,
    ) -> None:
        event = tool_result(
            self.session.next_seq, now_ms(), self.turn, self.step, call["id"], text, is_error
        )
        if error is not None:
            event.data["error"] = dict(error)
        self.emit(event)

    async def run(self, prompt: str) -> TurnOutcome:
        session = self.session
        self.started = True
        self.emit(turn_start(session.next_seq, now_ms(), self.turn))
        self.emit(user_message(session.next_seq, now_ms(), prompt))
        max_steps = self.agent.config.max_steps
        while True:
            self.step += 1
            try:
                has_calls, finish_kind = await self.run_step()
            except _StepFailed as failed:
                self.end_step()
                return self.end_turn("error", failed.error)
            self.end_step()
            if finish_kind == "max-tokens":
                return self.end_turn("max-tokens")
            if has_calls:
                if self.step >= max_steps:
                    return self.end_turn(
                        "error", ModelError(f"step limit of {max_steps} reached", code="STEP_LIMIT")
                    )
                continue
            if finish_kind in ("stop", "tool-calls"):
                return self.end_turn("completed")
            return self.end_turn(
                "error",
                ModelError(
                    f"the model finished the step with reason {finish_kind!r}", code="MODEL_FINISH"
                ),
            )

    async def run_step(self) -> tuple[bool, str]:
        """One model call and its tool calls; returns (had tool calls, finish kind)."""
        session = self.session
        self.step_open = True
        self.emit(step_start(session.next_seq, now_ms(), self.turn, self.step))
        blocks, usage, finish_kind = await self.stream_with_retries()
        if finish_kind == "max-tokens":
            # Upstream (June and later): a truncated step's tool calls are dropped from the
            # message and never run (their arguments may be cut off).
            kept: list[ContentBlock] = [b for b in blocks if b["type"] != "tool-call"]
            blocks = kept
        self.last_content = blocks
        # Upstream logs a step's message only when it has content or usage to carry: an
        # empty one would add nothing to the history (the messages view skips it anyway).
        if blocks or usage is not None:
            self.emit(
                assistant_message(session.next_seq, now_ms(), self.turn, self.step, blocks, usage)
            )
        calls = [block for block in blocks if block["type"] == "tool-call"]
        config = self.agent.config
        self.schedule = ToolCallSchedule(
            calls,
            start=self.start_call,
            run=self.run_tool,
            commit=lambda call, outcome: self.emit_result(
                call, outcome.text, is_error=outcome.is_error, error=outcome.error
            ),
            is_parallel=self.is_parallel,
            bound=config.max_parallel_tool_calls if self.behaviour.concurrent_tools else 1,
        )
        await self.schedule.run()
        self.schedule = None
        return bool(calls), finish_kind

    def start_call(self, call: ToolCallBlock) -> None:
        self.emit_call(call)
        # The call is durable before its tool runs (a child's fork seed reads the log too).
        self.session.flush()

    def is_parallel(self, call: ToolCallBlock) -> bool:
        tool = self.agent.tools.get(call["name"])
        return tool is not None and is_parallel_safe(tool)

    async def stream_with_retries(self) -> tuple[list[ContentBlock], Usage | None, str]:
        """One model call, repeated (``current``) while the completion has no content.

        Each attempt is its own ``stream()`` call in the same step, its chunks logged as they
        come, as upstream's request-error retry does with an ``EMPTY_RESPONSE`` finish.
        """
        retries = self.behaviour.empty_response_retries
        attempt = 0
        while True:
            blocks, usage, finish_kind = await self.stream_step()
            if not (retries and is_empty_completion(blocks, self.finish_reason)):
                failure = finish_failure(self.finish_reason)
                if failure is not None:
                    raise _StepFailed(failure)
                return blocks, usage, finish_kind
            if attempt >= retries:
                raise _StepFailed(
                    ModelError(
                        f"model returned a completed response with no content "
                        f"({attempt + 1} attempts)",
                        code=EMPTY_RESPONSE_CODE,
                    )
                )
            attempt += 1

    async def stream_step(self) -> tuple[list[ContentBlock], Usage | None, str]:
        agent = self.agent
        session = self.session
        request = ModelRequest(
            session_id=session.id,
            messages=session_messages(session),
            tools=[tool.spec for tool in agent.tools.values()],
            system=agent.config.system_prompt,
            turn=self.turn,
            step=self.step,
            delegation=self.delegation,
        )
        if self.behaviour.logs_request_header:
            self.log_request_header(request)
        blocks: list[ContentBlock] = []
        usage: Usage | None = None
        finish_kind: str | None = None
        stream = agent.model.stream(request)
        try:
            async for chunk in stream:
                self.emit(assistant_chunk(session.next_seq, now_ms(), self.turn, self.step, chunk))
                if chunk["type"] == "block-end":
                    blocks.append(chunk["block"])
                elif chunk["type"] == "usage":
                    usage = chunk["usage"]
                elif chunk["type"] == "finish":
                    finish_kind = chunk["reason"]["kind"]
                    self.finish_reason = cast(Mapping[str, Any], chunk["reason"])
                    # Nothing may follow finish; stop reading rather than log a violation.
                    break
        except ModelError as error:
            raise _StepFailed(error) from error
        except Exception as error:  # any other failure of the client ends the turn, logged
            raise _StepFailed(ModelError(_describe(error), code="INTERNAL")) from error
        finally:
            await _aclose(stream)
        if finish_kind is None:
            raise _StepFailed(
                ModelError("the model stream ended without a finish chunk", code="INTERNAL")
            )
        return blocks, usage, finish_kind

    def log_request_header(self, request: ModelRequest) -> None:
        """Log ``request/header`` when this call's header is not the session's last one."""
        header = request_header(self.agent.model.request_config, request)
        if header == self.logged_header:
            return  # the common case, decided without scanning the log
        events = self.session.events
        reason = header_change(events, self.session.header.effective_seed_length, header)
        if reason is not None:
            self.emit(request_header_event(self.session.next_seq, now_ms(), header, reason))
        self.logged_header = header

    async def run_tool(self, call: ToolCallBlock) -> ToolOutcome:
        name = call["name"]
        tool = self.agent.tools.get(name)
        # Upstream's registry words for what the model got wrong, so a recording of it replays.
        if tool is None:
            return ToolOutcome(f'Error: unknown tool "{name}"', True, UNKNOWN_TOOL)
        raw = call["arguments"]
        try:
            arguments: Any = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            arguments = raw  # upstream hands the raw text on, which the schema then refuses
        if not isinstance(arguments, dict):
            text = 'Error: invalid arguments: "arguments" must be an object'
            return ToolOutcome(text, True, INVALID_ARGS)
        context = ToolContext(
            session=self.session,
            cwd=self.session.header.cwd or os.getcwd(),
            turn=self.turn,
            step=self.step,
            call_id=call["id"],
            agent=self.agent,
        )
        try:
            return await tool.run(cast(dict[str, Any], arguments), context)
        except Exception as error:  # a tool bug must not take the session down
            return _raised_outcome(error)

    def end_step(self) -> None:
        if self.step_open:
            self.step_open = False
            self.emit(step_end(self.session.next_seq, now_ms(), self.turn, self.step))
            self.session.flush()

    def end_turn(
        self, kind: TurnEndKind, error: ModelError | None = None, **details: Any
    ) -> TurnOutcome:
        if error is not None:
            details = {"step": self.step, "message": error.message}
            if error.code is not None:
                details["code"] = error.code
        self.emit(turn_end(self.session.next_seq, now_ms(), self.turn, kind, **details))
        self.session.flush()
        self.ended = TurnOutcome(self.turn, kind, _joined_text(self.last_content), error)
        return self.ended

    def abort(self) -> TurnOutcome:
        """Close whatever the cancellation left open (synchronously) and end the turn."""
        if self.ended is not None:
            return self.ended
        if not self.started:
            return TurnOutcome(self.turn, "aborted", "")
        schedule, self.schedule = self.schedule, None
        if schedule is not None:
            # Started calls keep model order: a settled one its real result, a running one
            # the cancelled result.
            for started in schedule.open_calls:
                outcome = started.outcome or ToolOutcome(CANCELLED_TEXT, True)
                self.emit_result(
                    started.call, outcome.text, is_error=outcome.is_error, error=outcome.error
                )
            # Calls the model asked for but that never ran still get a result, so the next
            # request's history pairs every tool-call block with a result.
            for call in schedule.unstarted:
                self.emit_call(call)
                self.emit_result(call, CANCELLED_BEFORE_DISPATCH_TEXT, is_error=True)
        self.end_step()
        return self.end_turn("aborted", reason="session/cancel")


def _joined_text(content: Sequence[ContentBlock]) -> str:
    return "".join(block["text"] for block in content if block["type"] == "text")


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _raised_outcome(error: Exception) -> ToolOutcome:
    """What the model sees of a tool that raised, as upstream's registry reports a throw:
    ``Error: <message>`` (the type's name when there is none), and ``{name, code}`` when the
    exception carries a string ``code`` (upstream's ``HarnessError``)."""
    code = getattr(error, "code", None)
    structured = {"name": type(error).__name__, "code": code} if isinstance(code, str) else None
    return ToolOutcome(f"Error: {str(error) or type(error).__name__}", True, structured)


async def _aclose(stream: object) -> None:
    aclose: Callable[[], Any] | None = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
