"""Driving ``dsh-acp-agent`` through a scenario's steps.

The process and its JSON-RPC transport are :class:`dsh_acp_agent.testing.AgentProcess`; this
layer adds the ``input.json`` steps and raises :class:`AgentError`, a :class:`DshError` the
runner turns into a scenario failure, for everything the agent does wrong.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_acp_agent import AgentForkServer, testing
from dsh_core import DshError
from dsh_snapshot._scenario import Step

__all__ = ["AgentError", "AgentProcess", "agent_command"]


def as_object(value: Any) -> dict[str, Any] | None:
    """``value`` as a JSON object, or ``None`` when it is something else."""
    if isinstance(value, dict):
        return value  # pyright: ignore[reportUnknownVariableType]
    return None


class AgentError(DshError):
    """The agent misbehaved: a timeout, a bad frame, an unexpected response, a bad exit."""


def agent_command() -> list[str]:
    """The command that starts the agent: the console script next to this interpreter."""
    script = Path(sys.executable).with_name("dsh-acp-agent")
    if script.is_file():
        return [str(script)]
    found = shutil.which("dsh-acp-agent")
    if found:
        return [found]
    return [sys.executable, "-m", "dsh_acp_agent"]


class AgentProcess(testing.AgentProcess):
    """One agent subprocess running a scenario; records every frame it writes, in order.

    Args:
        cwd: the process's working directory (the scenario's temporary cwd).
        env: the complete environment of the process (see :func:`base_env`).
        timeout: seconds any single wait (a frame, the exit) may take.
        start_timeout: seconds the first frame may take.
        fork_server: fork the agent from this warm server instead of starting an interpreter.
        command: start this agent instead of ``dsh-acp-agent`` (a foreign ACP agent).
    """

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,
        start_timeout: float = 120.0,
        fork_server: AgentForkServer | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            env,
            cwd,
            agent_command() if command is None else command,
            timeout=timeout,
            start_timeout=start_timeout,
            fork_server=fork_server,
        )
        self.cwd = cwd

    def _error(self, message: str) -> Exception:
        return AgentError(message)

    def _response_error(self, method: str, error: dict[str, Any]) -> Exception:
        return AgentError(f"{method} failed: {json.dumps(error)}; stderr: {self.stderr_tail()}")

    def _session(self, step: Step) -> str:
        if not self.session_ids:
            raise AgentError(f"step {step.op} needs a session: add a newSession step before it")
        return self.session_ids[-1]

    def _no_stray_lines(self) -> None:
        # A line that is not a JSON-RPC frame would corrupt a client reading the agent's stdout.
        if self.stray_lines:
            raise AgentError(
                f"the agent wrote a line to stdout that is not a JSON-RPC frame: "
                f"{self.stray_lines[0][:200]!r}"
            )

    def run_step(self, step: Step) -> None:
        """Drive one ``input.json`` step.

        Raises:
            AgentError: the agent answered wrongly, or not in time.
        """
        text = step.text or ""
        if step.op == "initialize":
            # The harness's terminalOutput: the client says it renders terminal output.
            meta = {"_meta": {"terminal_output": True}} if step.terminal_output else {}
            self.initialize(meta)
        elif step.op == "newSession":
            self.new_session(self.cwd)
        elif step.op == "newSessionExpectError":
            extra: dict[str, Any] = {}
            if step.additional_directories is not None:
                extra["additionalDirectories"] = step.additional_directories
            response = self.response(self.send_new_session(self.cwd, **extra))
            if "error" not in response:
                raise AgentError(
                    f"newSessionExpectError: session/new succeeded but an error response "
                    f"was expected: {json.dumps(response)}"
                )
        elif step.op == "loadSession":
            self.load_session(self._session(step), self.cwd)
        elif step.op == "prompt":
            self.prompt(self._session(step), text)
        elif step.op == "promptExpectError":
            response = self.response(self.send_prompt(self._session(step), text))
            if "error" not in response:
                raise AgentError(
                    f"promptExpectError: session/prompt succeeded but an error "
                    f"response was expected: {json.dumps(response)}"
                )
        elif step.op == "promptAndCancel":
            session_id = self._session(step)
            request_id = self.send_prompt(session_id, text)
            # As upstream's harness: cancel once the client has seen streamed message text,
            # so those frames always precede the cancelled response.
            if self.next_update(request_id, "agent_message_chunk") is None:
                raise AgentError(
                    "promptAndCancel: the prompt finished before any "
                    "agent_message_chunk, so there was nothing to cancel"
                )
            self.notify("session/cancel", {"sessionId": session_id})
            self.result(request_id)
        elif step.op == "cancel":
            self.notify("session/cancel", {"sessionId": self._session(step)})
        else:
            raise AgentError(f"needs op {step.op}: this runner does not drive it")
        self._no_stray_lines()

    def finish(self) -> int:
        """Close stdin, read stdout to its end, wait for the exit; returns the exit code.

        Raises:
            AgentError: the agent did not exit in time (it is killed) or wrote bad lines.
        """
        code = super().finish()
        self._no_stray_lines()
        return code


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The process environment minus every ``DSH_*``/``DEEPSEEK_*`` variable, plus ``extra``.

    A scenario must not depend on what the caller happens to have exported, and a replay must
    never see a real key.
    """
    return testing.agent_environment(extra)
