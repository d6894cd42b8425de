"""One step's tool calls, run in model order or in a bounded pool of parallel-safe calls.

The rules are upstream's later scheduler (``packages/core/agent-loop/src/tool-calls.ts`` at
head): a call that is not parallel-safe is a barrier that runs alone; a run of consecutive
parallel-safe calls shares a rolling pool of at most ``bound`` calls in flight. A call's
``tool/call`` is logged when it starts; results are logged strictly in model order, each as
soon as it and every call before it have settled. So the log of two concurrent calls is
always call A, call B, result A, result B, whichever finishes first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from dsh_core._events import ToolCallBlock
from dsh_core._tools import ToolOutcome

__all__ = ["CANCELLED_TEXT", "StartedCall", "ToolCallSchedule"]

CANCELLED_TEXT = "cancelled"
"""The result text of a call cancelled while it ran."""


@dataclass(slots=True)
class StartedCall:
    """A call whose ``tool/call`` is logged but whose result is not yet.

    ``outcome`` is set once the tool settled; it stays ``None`` while the tool runs.
    """

    call: ToolCallBlock
    outcome: ToolOutcome | None = None


class ToolCallSchedule:
    """Runs one step's calls and remembers, for a cancellation, what is still open.

    Args:
        calls: the step's tool calls in model order.
        start: logs a call's ``tool/call`` (and makes it durable) just before it runs.
        run: runs a call's tool; failures are outcomes, never raised (cancellation aside).
        commit: logs a call's ``tool/result``.
        is_parallel: whether a call may share the pool with its neighbours.
        bound: the most parallel-safe calls in flight at once (1: strictly one by one).
    """

    def __init__(
        self,
        calls: Sequence[ToolCallBlock],
        *,
        start: Callable[[ToolCallBlock], None],
        run: Callable[[ToolCallBlock], Coroutine[Any, Any, ToolOutcome]],
        commit: Callable[[ToolCallBlock, ToolOutcome], None],
        is_parallel: Callable[[ToolCallBlock], bool],
        bound: int = 1,
    ) -> None:
        if bound < 1:
            raise ValueError(f"the parallel tool-call bound must be at least 1, got {bound}")
        self._calls = list(calls)
        self._start_log = start
        self._run = run
        self._commit = commit
        self._is_parallel = is_parallel
        self._bound = bound
        self._next = 0
        self._open: list[StartedCall] = []

    @property
    def open_calls(self) -> list[StartedCall]:
        """Started calls without a logged result, in model order."""
        return list(self._open)

    @property
    def unstarted(self) -> list[ToolCallBlock]:
        """Calls the model asked for that have not started, in model order."""
        return self._calls[self._next :]

    async def run(self) -> None:
        """Run every call; on cancellation, in-flight calls are cancelled and awaited first."""
        while self._next < len(self._calls):
            if self._bound > 1 and self._is_parallel(self._calls[self._next]):
                await self._run_pool()
            else:
                started = self._start_next()
                started.outcome = await self._run(started.call)
                self._commit_ready()

    def _start_next(self) -> StartedCall:
        call = self._calls[self._next]
        self._next += 1
        started = StartedCall(call)
        self._open.append(started)
        self._start_log(call)
        return started

    def _commit_ready(self) -> None:
        while self._open and self._open[0].outcome is not None:
            done = self._open.pop(0)
            assert done.outcome is not None  # checked by the loop condition
            self._commit(done.call, done.outcome)

    async def _run_pool(self) -> None:
        in_flight: dict[asyncio.Task[ToolOutcome], StartedCall] = {}
        try:
            while True:
                while (
                    len(in_flight) < self._bound
                    and self._next < len(self._calls)
                    and self._is_parallel(self._calls[self._next])
                ):
                    started = self._start_next()
                    in_flight[asyncio.create_task(self._run(started.call))] = started
                if not in_flight:
                    return
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                # Settle in model order so the commit below never depends on set order.
                for task in sorted(done, key=lambda t: self._open.index(in_flight[t])):
                    in_flight.pop(task).outcome = _outcome_of(task)
                self._commit_ready()
        except BaseException:
            # Cancelled (or failed) while calls run: stop them and let each close its own
            # state (a child closes its log) before the turn closes the parent's.
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)
            for task, started in in_flight.items():
                if not task.cancelled() and task.exception() is None:
                    started.outcome = task.result()
            raise


def _outcome_of(task: asyncio.Task[ToolOutcome]) -> ToolOutcome:
    if task.cancelled():
        return ToolOutcome(CANCELLED_TEXT, True)
    return task.result()
