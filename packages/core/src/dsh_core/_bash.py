"""The ``bash`` tool: one shell command in the session's working directory.

What the model sees is upstream's (``@deepseek-ai/dsh-tool-bash`` ``renderResult``, June 2026):
stdout, then a ``[stderr]`` section, ``(no output)`` when both are empty, then the markers
``[timed out after Nms]``, ``[killed by signal: SIG]`` or ``[exit code: N]``. A non-zero exit is
reported, not an error: only a command that could not start (or bad arguments) is ``is_error``.
Each stream keeps its tail in memory (``max_output_bytes``); when it overflows, the stream is
spilled to a file in the run's private temp dir (inside the run, removed with it, visible to the
next command at the same path) whose path the truncation notice names; a spill file stops
growing at ``max_spill_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import secrets
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core._model import ToolSpec
from dsh_core._sandbox import ConfinedCommand, SandboxUnavailableError, ToolSandbox
from dsh_core._tools import INVALID_ARGS, ToolContext, ToolOutcome

__all__ = [
    "BashResult",
    "BashTool",
    "CollectedOutput",
    "OutputCollector",
    "bash_argument_errors",
    "render_bash_result",
]

_READ_SIZE = 65_536
_spill_counter = itertools.count(1)
MAX_SPILL_BYTES = 16 * 1024 * 1024
"""Where a spill file stops growing: a command printing without end must not fill the disk."""

# Colours, pagers and terminal features would garble what the model reads (upstream's set),
# laid over the sandbox's allow-listed environment.
ENV_OVERRIDES = {"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}


@dataclass(frozen=True, slots=True)
class CollectedOutput:
    """One stream of a finished command: its kept tail, whether the head was dropped, the
    file holding the stream when it overflowed (``None`` if none or lost) and, when that file
    stopped growing at its cap, the cap in bytes."""

    text: str
    truncated: bool = False
    spill_path: str | None = None
    spill_capped_at: int | None = None


@dataclass(frozen=True, slots=True)
class BashResult:
    """How a command ended: exit code or signal name, whether the timeout fired, its output."""

    exit_code: int | None
    signal: str | None
    timed_out: bool
    timeout_ms: float
    stdout: CollectedOutput
    stderr: CollectedOutput


def _js_number(value: float) -> str:
    """``value`` printed as JavaScript prints a number (``100``, not ``100.0``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _stream_text(output: CollectedOutput) -> str:
    if not output.truncated:
        return output.text
    if output.spill_capped_at is not None and output.spill_path is not None:
        kept = f"first {output.spill_capped_at} bytes"
        return f"{output.text}\n[output truncated; {kept}: {output.spill_path}]"
    return f"{output.text}\n[output truncated; full output: {output.spill_path or '(unavailable)'}]"


def render_bash_result(result: BashResult) -> str:
    """The text the model sees for a finished command (upstream's ``renderResult``)."""
    body = _stream_text(result.stdout)
    err = _stream_text(result.stderr)
    if err:
        if body and not body.endswith("\n"):
            body += "\n"
        body += f"[stderr]\n{err}"
    if not body:
        body = "(no output)"
    markers: list[str] = []
    # A command that traps SIGTERM can exit 0 after the timer fired: still say it was cut short.
    if result.timed_out:
        markers.append(f"[timed out after {_js_number(result.timeout_ms)}ms]")
    if result.signal is not None:
        markers.append(f"[killed by signal: {result.signal}]")
    elif result.exit_code != 0:
        markers.append(f"[exit code: {result.exit_code}]")
    if not markers:
        return body
    if not body.endswith("\n"):
        body += "\n"
    return body + "\n".join(markers)


class OutputCollector:
    """One stream with a bounded in-memory tail; the whole stream spills to a file on overflow.

    Whole read chunks are dropped from the head while more than ``max_bytes`` are kept; a
    single chunk larger than the cap keeps its tail (upstream's ``OutputCollector``).
    """

    def __init__(
        self, max_bytes: int, label: str, spill_dir: Path, max_spill_bytes: int = MAX_SPILL_BYTES
    ) -> None:
        self.max_bytes = max_bytes
        self.label = label
        self._spill_dir = spill_dir
        self._max_spill = max_spill_bytes
        self._spilled = 0
        self._capped = False
        self._chunks: list[bytes] = []
        self._bytes = 0
        self._dropped = False
        self._spill_fd: int | None = None
        self._spill_path: str | None = None
        self.total_bytes = 0

    def push(self, chunk: bytes) -> None:
        """Add ``chunk``, dropping head chunks past the cap and spilling once it overflows."""
        self.total_bytes += len(chunk)
        if self._bytes + len(chunk) > self.max_bytes or self._spill_fd is not None:
            self._spill(chunk)
        self._chunks.append(chunk)
        self._bytes += len(chunk)
        while self._bytes > self.max_bytes and len(self._chunks) > 1:
            self._bytes -= len(self._chunks.pop(0))
            self._dropped = True
        if self._bytes > self.max_bytes:
            self._chunks[0] = self._chunks[0][len(self._chunks[0]) - self.max_bytes :]
            self._bytes = self.max_bytes
            self._dropped = True

    def _spill(self, chunk: bytes) -> None:
        if self._spill_fd is None:
            folder = self._spill_dir
            name = (
                f"dsh-bash-{os.getpid()}-{next(_spill_counter)}-{secrets.token_hex(6)}"
                f"-{self.label}.log"
            )
            path = folder / name
            # O_EXCL refuses any existing path, a planted symlink included.
            self._spill_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self._spill_path = str(path)
            for prior in self._chunks:
                self._write_spill(prior)
        self._write_spill(chunk)

    def _write_spill(self, data: bytes) -> None:
        assert self._spill_fd is not None
        room = self._max_spill - self._spilled
        if len(data) > room:
            self._capped = True
            data = data[: max(room, 0)]
        if data:
            os.write(self._spill_fd, data)
            self._spilled += len(data)

    def finalize(self) -> CollectedOutput:
        """Close the spill file; the kept tail. A failed close drops the spill path, since the
        file may miss its end."""
        if self._spill_fd is not None:
            try:
                os.close(self._spill_fd)
            except OSError:
                self._spill_path = None
            self._spill_fd = None
        text = b"".join(self._chunks).decode("utf-8", errors="replace")
        capped_at = self._max_spill if self._capped else None
        return CollectedOutput(text, self._dropped, self._spill_path, capped_at)


class _ArgsError(Exception):
    pass


def bash_argument_errors(arguments: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``bash`` arguments against the schema (upstream's wording, in
    declaration order); empty when they are valid. UIs use it to present a call softly."""
    kinds = (
        ("command", str, "a string", True),
        ("description", str, "a string", True),
        ("timeoutMs", (int, float), "a number", False),
        ("workdir", str, "a string", False),
        ("run_in_background", bool, "a boolean", False),
    )
    violations: list[str] = []
    for key, kind, name, required in kinds:
        value = arguments.get(key)
        if value is None:
            if required:
                violations.append(f'missing required property "{key}"')
            continue
        bad_number = kind is not bool and isinstance(value, bool)  # JSON true is no number
        if bad_number or not isinstance(value, kind):
            violations.append(f'"{key}" must be {name}')
    return violations


class BashTool:
    """Runs ``bash -c <command>`` in the session cwd (or ``workdir``), like upstream's tool.

    The command leads its own process group with ``/dev/null`` as stdin. On a timeout the
    group gets SIGTERM, then SIGKILL after ``grace_ms``; a cancelled turn kills it at once.
    It never sees the agent's environment: it runs with the allow-listed one of ``sandbox``
    (a private ``HOME`` and ``TMPDIR``, no credentials) and inside its confinement.

    Args:
        timeout_ms: default milliseconds before the command is stopped.
        max_timeout_ms: the cap on a call's own ``timeoutMs``.
        max_output_bytes: bytes of each stream kept in memory (the tail).
        grace_ms: milliseconds between SIGTERM and SIGKILL.
        spill_dir: where overflowing streams are written (default: the sandbox's private temp
            dir, inside the run and removed with it).
        sandbox: the run's confinement (default: one configured from ``DSH_SANDBOX*``).
    """

    def __init__(
        self,
        timeout_ms: float = 120_000,
        *,
        max_timeout_ms: float = 600_000,
        max_output_bytes: int = 64_000,
        grace_ms: float = 3_000,
        spill_dir: Path | None = None,
        sandbox: ToolSandbox | None = None,
    ) -> None:
        for name, value in (
            ("timeout_ms", timeout_ms),
            ("max_timeout_ms", max_timeout_ms),
            ("max_output_bytes", max_output_bytes),
        ):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value}")
        if grace_ms < 0:
            raise ValueError(f"grace_ms must not be negative, got {grace_ms}")
        self.timeout_ms = timeout_ms
        self.max_timeout_ms = max_timeout_ms
        self.max_output_bytes = max_output_bytes
        self.grace_ms = grace_ms
        self.spill_dir = spill_dir
        self.sandbox = sandbox if sandbox is not None else ToolSandbox()

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="bash",
            description=(
                "Execute a bash command (`bash -c`) and return its stdout/stderr. Each call runs "
                "in a fresh shell: no state (cwd, variables, functions) persists between calls "
                "— pass `workdir` instead of using `cd`. Non-zero exits are reported as "
                "`[exit code: N]`. Long output is truncated to its tail; the full output is "
                "saved to a file whose path is reported."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to execute."},
                    "description": {
                        "type": "string",
                        "description": "Clear, concise description of what this command does "
                        "in active voice, 5-10 words (shown in the UI).",
                    },
                    "timeoutMs": {
                        "type": "number",
                        "description": "Timeout in milliseconds (capped); the command is "
                        "killed on expiry.",
                    },
                    "workdir": {
                        "type": "string",
                        "description": "Working directory for this command. Defaults to the "
                        "session workspace; a relative path is resolved against it.",
                    },
                },
                "required": ["command", "description"],
            },
        )

    async def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolOutcome:
        """Run the command.

        Returns:
            :func:`render_bash_result` of the run; ``is_error`` only for invalid arguments or a
            command that could not start (texts begin with ``Error:`` as upstream's do).
        """
        violations = bash_argument_errors(arguments)
        if violations:
            text = f"Error: invalid arguments: {'; '.join(violations)}"
            return ToolOutcome(text, True, INVALID_ARGS)
        try:
            command, timeout_ms, cwd = self._resolve(arguments, context)
        except _ArgsError as error:
            return ToolOutcome(f"Error: {error}", True)
        try:
            # Confined to the session's cwd, whatever workdir the command starts in.
            confined = self.sandbox.confine(
                ["bash", "-c", command],
                context.cwd,
                env=self.sandbox.environment() | ENV_OVERRIDES,
                chdir=cwd,
                supervised=True,
            )
        except SandboxUnavailableError as error:
            return ToolOutcome(f"Error: {error}", True)
        # The process exists before create_subprocess_exec returns (it still connects the
        # pipes); a cancellation in that window must not leave the command's group running.
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *confined.argv,
                cwd=cwd,
                env=confined.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                pass_fds=confined.pass_fds,
            )
        )
        try:
            try:
                process = await asyncio.shield(spawn)
            finally:
                confined.started()
        except FileNotFoundError:
            confined.close()
            # Node's words for it (upstream's text), then ours.
            return ToolOutcome(
                f"Error: spawn bash ENOENT: the working directory {cwd} does not exist", True
            )
        except OSError as error:
            confined.close()
            return ToolOutcome(f"Error: spawn bash failed in {cwd}: {error}", True)
        except asyncio.CancelledError:
            confined.close()
            with contextlib.suppress(OSError):
                await _kill_now(await spawn)
            raise
        try:
            result = await self._wait(process, confined, timeout_ms)
        finally:
            confined.close()
        return ToolOutcome(render_bash_result(result))

    def _resolve(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> tuple[str, float, str]:
        command: str = arguments["command"]
        if not command.strip():
            raise _ArgsError("invalid command: expected a non-empty string")
        if not str(arguments["description"]).strip():
            raise _ArgsError("invalid description: expected a non-empty string")
        requested = arguments.get("timeoutMs")
        if requested is not None and (not math.isfinite(requested) or requested <= 0):
            raise _ArgsError(f"invalid timeoutMs: expected a positive number, got {requested}")
        if arguments.get("run_in_background") is True:
            raise _ArgsError(
                "run_in_background is not supported: background tasks are not implemented "
                "(run the command in the foreground)"
            )
        timeout_ms = min(
            requested if requested is not None else self.timeout_ms, self.max_timeout_ms
        )
        workdir = arguments.get("workdir")
        cwd = context.cwd if workdir is None else os.path.join(context.cwd, workdir)
        if not os.path.isdir(cwd):
            # Node's words for it (upstream's text), then ours; checked here because bubblewrap
            # would only say it cannot chdir.
            raise _ArgsError(f"spawn bash ENOENT: the working directory {cwd} does not exist")
        return command, timeout_ms, cwd

    async def _kill(
        self,
        process: asyncio.subprocess.Process,
        confined: ConfinedCommand,
        done: asyncio.Future[Any],
    ) -> None:
        # Through the supervisor first: the sandbox then ends by itself, its last process gone
        # when the command's result is returned. Killing bubblewrap from outside ends it too,
        # but a moment later (its PID 1 dies with it): the fallback if the supervisor is stuck.
        if confined.signal(signal.SIGKILL):
            try:
                await asyncio.wait_for(asyncio.shield(done), self.grace_ms / 1000)
                return
            except TimeoutError:
                pass
        _signal_group(process, signal.SIGKILL)
        await asyncio.shield(done)

    async def _wait(
        self, process: asyncio.subprocess.Process, confined: ConfinedCommand, timeout_ms: float
    ) -> BashResult:
        spill_dir = self.spill_dir or self.sandbox.tmp
        out = OutputCollector(self.max_output_bytes, "stdout", spill_dir)
        err = OutputCollector(self.max_output_bytes, "stderr", spill_dir)
        assert process.stdout is not None  # PIPE
        assert process.stderr is not None  # PIPE
        done = asyncio.gather(
            _pump(process.stdout, out), _pump(process.stderr, err), process.wait()
        )
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(done), timeout_ms / 1000)
            except TimeoutError:
                timed_out = True
                # Sandboxed, the command's own group is inside: its supervisor signals it.
                if not confined.signal(signal.SIGTERM):
                    _signal_group(process, signal.SIGTERM)
                try:
                    await asyncio.wait_for(asyncio.shield(done), self.grace_ms / 1000)
                except TimeoutError:
                    await self._kill(process, confined, done)
        except BaseException:
            # Cancelled turn (or a failure while reading): nothing of the command may survive.
            await _kill_now(process)
            with contextlib.suppress(BaseException):
                await done
            raise
        code = process.returncode
        status = confined.wait_status()
        if status is not None:
            # The command's own end: bubblewrap would say 128+N for a signal N.
            code = os.waitstatus_to_exitcode(status)
        return BashResult(
            exit_code=code if code is not None and code >= 0 else None,
            signal=_signal_name(-code) if code is not None and code < 0 else None,
            timed_out=timed_out,
            timeout_ms=timeout_ms,
            stdout=out.finalize(),
            stderr=err.finalize(),
        )


async def _pump(stream: asyncio.StreamReader, into: OutputCollector) -> None:
    while data := await stream.read(_READ_SIZE):
        into.push(data)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _signal_group(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    # The whole group, even when bash itself has exited: a background child may still hold
    # the output pipe open. A kill that races the exit is harmless.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


async def _kill_now(process: asyncio.subprocess.Process) -> None:
    _signal_group(process, signal.SIGKILL)
    # Reap it (shielded: a second cancellation must not leave a zombie and an open transport).
    await asyncio.shield(process.wait())
