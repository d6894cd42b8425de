"""Driving an ACP agent through a scenario's steps (each op's driver is in the registry).

The process and its JSON-RPC transport are a :class:`dsh_acp_agent.testing.AgentProcess` that
this layer holds (composition, not a subclass): it adds the ``input.json`` steps and raises
:class:`AgentError`, a :class:`DshError` the runner turns into a scenario failure, for
everything the agent does wrong.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_acp_agent import AgentForkServer, testing
from dsh_core import ProcessConfinement, host_which
from dsh_snapshot._scenario import Step
from dsh_snapshot._steps import OPS, AgentError

__all__ = ["AgentAnsweredError", "AgentError", "ScenarioAgent", "agent_command"]


def as_object(value: Any) -> dict[str, Any] | None:
    """``value`` as a JSON object, or ``None`` when it is something else."""
    if isinstance(value, dict):
        return value  # pyright: ignore[reportUnknownVariableType]
    return None


def agent_command() -> list[str]:
    """The command that starts the agent: the console script next to this interpreter."""
    script = Path(sys.executable).with_name("dsh-acp-agent")
    if script.is_file():
        return [str(script)]
    # Absolute PATH entries only: a relative one would find a program in the run's cwd.
    found = host_which("dsh-acp-agent")
    if found:
        return [found]
    return [sys.executable, "-P", "-m", "dsh_acp_agent"]  # -P: never the cwd's modules


class AgentAnsweredError(AgentError):
    """The agent answered a step with an error: it is alive and still reads its input (not
    a timeout or a crash), so it can be asked to exit cleanly."""


class ScenarioAgent:
    """One agent subprocess running a scenario; records every frame it writes, in order.

    It holds a :class:`dsh_acp_agent.testing.AgentProcess` (the process and its JSON-RPC
    transport) and adds the ``input.json`` steps on top; every error of the driver becomes an
    :class:`AgentError` here, at this one boundary.

    Args:
        cwd: the process's working directory (the scenario's temporary cwd).
        env: the complete environment of the process (see
            :func:`dsh_acp_agent.testing.agent_environment`).
        timeout: seconds any single wait (a frame, the exit) may take.
        start_timeout: seconds the first frame may take.
        fork_server: fork the agent from this warm server instead of starting an interpreter.
        command: start this agent instead of ``dsh-acp-agent`` (a foreign ACP agent).
        pass_fds: descriptors ``command`` inherits (its sandbox's).
        confinement: how a warm (forked) agent confines itself after the fork.
        deadline: ``time.monotonic()`` by which the whole run must be over (``--run-timeout``).
    """

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,
        start_timeout: float = 120.0,
        fork_server: AgentForkServer | None = None,
        command: Sequence[str] | None = None,
        pass_fds: Sequence[int] = (),
        confinement: ProcessConfinement | None = None,
        deadline: float | None = None,
    ) -> None:
        self.cwd = cwd
        self.acp = testing.AgentProcess(
            env,
            cwd,
            agent_command() if command is None else command,
            timeout=timeout,
            start_timeout=start_timeout,
            fork_server=fork_server,
            pass_fds=pass_fds,
            confinement=confinement,
            deadline=deadline,
        )

    @property
    def frames(self) -> list[dict[str, Any]]:
        """Every JSON-RPC frame the agent wrote to stdout, in arrival order."""
        return self.acp.frames

    @property
    def session_ids(self) -> list[str]:
        """The ids ``newSession`` steps received, in order."""
        return self.acp.session_ids

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters of the agent's stderr (``(empty)`` when none)."""
        return self.acp.stderr_tail(limit)

    def run_step(self, step: Step) -> None:
        """Drive one ``input.json`` step through its op's registered driver.

        Raises:
            AgentError: the agent answered wrongly, or not in time.
        """
        with self._as_agent_error():
            OPS.drive(self, step.raw)
        self._no_stray_lines()

    def finish(self) -> int:
        """Close stdin, read stdout to its end, wait for the exit; returns the exit code.

        Raises:
            AgentError: the agent did not exit in time (it is killed) or wrote bad lines.
        """
        with self._as_agent_error():
            code = self.acp.finish()
        self._no_stray_lines()
        return code

    def kill(self) -> None:
        """Kill the process if it still runs and close its pipes (idempotent)."""
        self.acp.kill()

    def __enter__(self) -> ScenarioAgent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    @contextlib.contextmanager
    def _as_agent_error(self) -> Generator[None, None, None]:
        try:
            yield
        except testing.ResponseError as exc:
            raise AgentAnsweredError(f"{exc}; stderr: {self.acp.stderr_tail()}") from None
        except testing.DeadlineError as exc:
            # One line: a long (live) recording meets this; the way out is a larger bound.
            last = self.acp.stderr_tail().splitlines()[-1]
            raise AgentError(
                f"the run took longer than --run-timeout (default 3 x --timeout) while waiting "
                f"for {exc.waiting_for}; give a long recording more with --run-timeout SECONDS "
                f"(the agent's stderr ends: {last})"
            ) from None
        except testing.AgentProcessError as exc:
            raise AgentError(str(exc)) from None

    def session(self, op: str) -> str:
        """The last session ``newSession`` opened (what an op's driver sends to).

        Raises:
            AgentError: no session is open yet.
        """
        if not self.session_ids:
            raise AgentError(f"step {op} needs a session: add a newSession step before it")
        return self.session_ids[-1]

    def _no_stray_lines(self) -> None:
        # A line that is not a JSON-RPC frame would corrupt a client reading the agent's stdout.
        if self.acp.stray_lines:
            raise AgentError(
                f"the agent wrote a line to stdout that is not a JSON-RPC frame: "
                f"{self.acp.stray_lines[0][:200]!r}"
            )
