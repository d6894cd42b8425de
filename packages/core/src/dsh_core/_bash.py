"""The ``bash`` tool: one shell command in the session's working directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from typing import Any

from dsh_core._model import ToolSpec
from dsh_core._sandbox import SandboxUnavailableError, ToolSandbox
from dsh_core._tools import ToolContext, ToolOutcome

__all__ = ["BashTool"]

_READ_SIZE = 65_536


class BashTool:
    """Runs ``bash -c <command>`` in the session cwd, stdout and stderr merged.

    The command gets its own process group and ``/dev/null`` as stdin; a timeout or a
    cancelled turn kills the whole group, so background children do not outlive the call.
    It never sees the agent's environment: it runs with the allow-listed one of ``sandbox``
    (a private ``HOME`` and ``TMPDIR``, no credentials) and inside its confinement.

    Args:
        timeout_s: seconds before the command's process group is killed.
        output_cap: characters of output kept; the rest is cut with a note saying so.
        sandbox: the run's confinement (default: one configured from ``DSH_SANDBOX*``).
    """

    def __init__(
        self, timeout_s: float = 120, output_cap: int = 30_000, sandbox: ToolSandbox | None = None
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if output_cap < 1:
            raise ValueError(f"output_cap must be at least 1, got {output_cap}")
        self.timeout_s = timeout_s
        self.output_cap = output_cap
        self.sandbox = sandbox if sandbox is not None else ToolSandbox()

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="bash",
            description=(
                "Run a shell command with bash in the session's working directory and return "
                "its combined stdout and stderr. Non-zero exit codes are reported. Commands "
                f"are killed after {self.timeout_s:g} seconds; stdin is empty."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to run."},
                    "description": {
                        "type": "string",
                        "description": "A few words saying what the command does.",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        """Run the command.

        Returns:
            The output exactly as printed; on a non-zero exit the output plus a line
            ``[exit code N]`` and ``is_error``; on a timeout the partial output plus a line
            ``command timed out after Ns`` and ``is_error``.
        """
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolOutcome("bash: the 'command' argument must be a non-empty string", True)
        try:
            argv = await self.sandbox.wrap(["bash", "-c", command], context.cwd)
        except SandboxUnavailableError as error:
            return ToolOutcome(f"bash: {error}", True)
        # The process exists before create_subprocess_exec returns (it still connects the
        # pipes); a cancellation in that window must not leave the command's group running.
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *argv,
                cwd=context.cwd,
                env=self.sandbox.environment(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        )
        try:
            process = await asyncio.shield(spawn)
        except OSError as error:
            return ToolOutcome(f"bash: could not start the command in {context.cwd}: {error}", True)
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):
                await _kill_group(await spawn)
            raise
        collected = _Collected()
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._collect(process, collected)
                await process.wait()
        except TimeoutError:
            await _kill_group(process)
            text = self._render(collected)
            return ToolOutcome(
                _with_line(text, f"command timed out after {self.timeout_s:g}s"), True
            )
        except BaseException:
            # Cancelled turn (or a failure while reading): nothing of the command may survive.
            await _kill_group(process)
            raise
        text = self._render(collected)
        code = process.returncode
        if code == 0:
            return ToolOutcome(text)
        if code is not None and code < 0:
            return ToolOutcome(_with_line(text, f"[killed by signal {_signal_name(-code)}]"), True)
        return ToolOutcome(_with_line(text, f"[exit code {code}]"), True)

    async def _collect(self, process: asyncio.subprocess.Process, into: _Collected) -> None:
        stream = process.stdout
        assert stream is not None  # stdout=PIPE
        # Up to 4 bytes a character: enough bytes to fill the cap, never unbounded memory.
        keep = self.output_cap * 4 + 4
        while True:
            data = await stream.read(_READ_SIZE)
            if not data:
                return
            into.total += len(data)
            room = keep - len(into.data)
            if room > 0:
                into.data.extend(data[:room])

    def _render(self, collected: _Collected) -> str:
        text = collected.data.decode("utf-8", errors="replace")
        if len(text) > self.output_cap or collected.total > len(collected.data):
            text = text[: self.output_cap]
            text = _with_line(
                text,
                f"[output truncated to {self.output_cap} characters; the "
                f"command printed {collected.total} bytes]",
            )
        return text


class _Collected:
    def __init__(self) -> None:
        self.data = bytearray()
        self.total = 0


def _with_line(text: str, line: str) -> str:
    if text and not text.endswith("\n"):
        text += "\n"
    return text + line


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    # The whole group, even when bash itself has exited: a background child may still hold
    # the output pipe open.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    # Reap it (shielded: a second cancellation must not leave a zombie and an open transport).
    await asyncio.shield(process.wait())
