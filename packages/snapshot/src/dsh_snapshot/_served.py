"""The helper servers a run starts as subprocesses (the scripted model server, dsh-llm-proxy).

Each prints ``BASE_URL=…`` on stdout once it accepts connections; the run points the agent's
model client there and stops the server when the block ends, however it ends.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path

from dsh_snapshot._agent import AgentError

__all__ = ["served_base_url", "stderr_tail"]

_STOP_GRACE_S = 10.0


def stderr_tail(path: Path, limit: int = 1500) -> str:
    """The last ``limit`` characters a helper wrote to its stderr log ("" when unreadable)."""
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    return ""


@contextlib.contextmanager
def served_base_url(
    command: Sequence[str],
    *,
    what: str,
    stderr_log: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    hold_stdin: bool = False,
) -> Generator[str, None, None]:
    """Run ``command`` until the block ends; yield the base URL it prints.

    Args:
        command: the server's argv.
        what: how errors name it (``dsh-llm-proxy``).
        stderr_log: where its stderr goes (kept for later error messages).
        timeout: seconds to wait for ``BASE_URL=…``.
        env: its whole environment (``None``: this process's).
        hold_stdin: give it a pipe held open for the whole block, for a server that stops at
            the end of its stdin.

    Raises:
        AgentError: it exited or printed no base URL within ``timeout`` (with its stderr).
    """
    with stderr_log.open("wb") as stderr:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE if hold_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=None if env is None else dict(env),
        )
        try:
            base_url = _read_base_url(proc, timeout)
            if base_url is None:
                raise AgentError(
                    f"{what} did not print BASE_URL=…; stderr: {stderr_tail(stderr_log)}"
                )
            yield base_url
        finally:
            _stop(proc)


def _read_base_url(proc: subprocess.Popen[bytes], timeout: float) -> str | None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline().decode("utf-8", "replace")
        if line.startswith("BASE_URL="):
            return line.strip().split("=", 1)[1]
        if not line:
            break
    return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=_STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
