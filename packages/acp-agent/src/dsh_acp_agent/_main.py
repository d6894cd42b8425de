"""The ``dsh-acp-agent`` process: settings, wiring, the stdio loop and the exit code."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from dsh_acp_agent._exit import EXIT_OK, EXIT_REPLAY_NOT_CONSUMED, EXIT_USAGE
from dsh_acp_agent._server import AGENT_NAME, AcpServer, connect, package_version
from dsh_acp_agent._settings import (
    AgentSettings,
    SettingsError,
    describe_validation_error,
    load_settings,
)
from dsh_acp_agent._transport import FrameTransport, StdinFeed, protect_stdout
from dsh_core import (
    DEFAULT_SYSTEM_PROMPT,
    Agent,
    AgentConfig,
    BashTool,
    DshError,
    ModelClient,
    SandboxSettings,
    SessionStore,
    SubagentTool,
    TodoWriteTool,
    Tool,
    ToolSandbox,
)
from dsh_core.plugins import create_model, env_prefix, model_provider, open_store
from dsh_subagent_fork import ForkBackend
from dsh_subagent_spawn import SpawnBackend

__all__ = ["build_agent", "main"]

_log = logging.getLogger("dsh_acp_agent")


@runtime_checkable
class ConsumedAtExit(Protocol):
    """A model client that must be used up exactly (the replay client): checked at exit."""

    def assert_consumed(self) -> None: ...


@dataclass
class Wiring:
    """What one agent process runs on."""

    agent: Agent
    replay: ConsumedAtExit | None


def build_store(settings: AgentSettings) -> SessionStore:
    """The store backend ``DSH_STORE`` names (a ``dsh.stores`` plugin), rooted at
    ``DSH_SESSIONS_ROOT``. Only the selected backend is imported: a cold start pays for one."""
    root = settings.sessions_root
    root.mkdir(parents=True, exist_ok=True)
    return open_store(settings.store, root)


def build_model(settings: AgentSettings) -> tuple[ModelClient, ConsumedAtExit | None]:
    """The client of the model provider ``DSH_MODEL_CLIENT`` names (a ``dsh.models`` plugin),
    and it again when it must be consumed exactly at exit (the replay client).

    Only the selected provider is imported: a replayed run never loads httpx and the live
    client, a live one never loads the replay machinery.

    Raises:
        SettingsError: the provider's own settings are invalid.
    """
    provider = model_provider(settings.model_client)
    try:
        model = create_model(settings.model_client)
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc, env_prefix(provider))) from exc
    return model, model if isinstance(model, ConsumedAtExit) else None


def build_sandbox() -> ToolSandbox:
    """The bash tool's confinement as ``DSH_SANDBOX*`` and ``DSH_TOOL_ENV_ALLOW`` configure it.

    Raises:
        SettingsError: one of those variables is invalid.
    """
    try:
        return ToolSandbox(SandboxSettings())
    except ValidationError as exc:
        raise SettingsError(describe_validation_error(exc, "DSH_")) from exc


def system_prompt(settings: AgentSettings) -> str:
    """``DSH_SYSTEM_PROMPT_FILE``'s text, or the built-in prompt when it is unset.

    Raises:
        SettingsError: the file cannot be read as UTF-8 text.
    """
    path = settings.system_prompt_file
    if path is None:
        return DEFAULT_SYSTEM_PROMPT
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"invalid DSH_SYSTEM_PROMPT_FILE={str(path)!r}: {exc}") from None


def build_agent(settings: AgentSettings) -> Wiring:
    """The agent with its store, model client and tools (bash, subagent, subagent_fork; and
    todo_write in the ``current`` profile: June's agent had no todo tool)."""
    sandbox = build_sandbox()
    model, replay = build_model(settings)
    store = build_store(settings)
    bash = BashTool(sandbox=sandbox)
    if settings.bash_timeout is not None:
        limit_ms = settings.bash_timeout * 1000
        max_ms = max(limit_ms, bash.max_timeout_ms)
        bash = BashTool(limit_ms, max_timeout_ms=max_ms, sandbox=sandbox)
    tools: list[Tool] = [bash, SubagentTool(SpawnBackend()), SubagentTool(ForkBackend())]
    if settings.loop_profile == "current":
        tools.append(TodoWriteTool())
    config = AgentConfig(
        system_prompt=system_prompt(settings),
        max_steps=settings.max_steps,
        max_delegation_depth=settings.max_delegation_depth,
        profile=settings.loop_profile,
        max_parallel_tool_calls=settings.max_parallel_tool_calls,
    )
    return Wiring(Agent(model, store, tools, config), replay)


async def serve(wiring: Wiring, rpc_fd: int) -> int:
    """Serve ACP on stdin / ``rpc_fd`` until stdin closes; return the exit code."""
    loop = asyncio.get_running_loop()
    stdin = StdinFeed(loop)
    transport = FrameTransport(stdin.reader, rpc_fd)
    server = AcpServer(wiring.agent)
    conn = connect(server, transport)

    def stop() -> None:
        # Running turns end as aborted and are answered; then the process ends as at EOF.
        server.cancel_all()
        stdin.end()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    try:
        await conn.main_loop()
    finally:
        server.cancel_all()
        await conn.close()
        server.close()
        await wiring.agent.model.aclose()
    return finish_replay(wiring.replay)


def finish_replay(replay: ConsumedAtExit | None) -> int:
    """The exit code after a replay: whether every script was consumed exactly.

    The report itself is the replay client's to write (at its ``aclose``, from
    ``DSH_REPLAY_REPORT``); this only turns the verdict into the process's exit code.
    """
    if replay is None:
        return EXIT_OK
    try:
        replay.assert_consumed()
    except Exception as exc:  # the replay package's NotConsumedError, reported as is
        print(f"dsh-acp-agent: {exc}", file=sys.stderr)
        return EXIT_REPLAY_NOT_CONSUMED
    return EXIT_OK


def _parse_command_line(argv: list[str]) -> None:
    """``--help`` and ``--version`` answer and exit before stdin is touched; the agent takes no
    other argument (its settings are environment variables), so anything else is exit 2."""
    if not argv:  # how a client starts it: no parser to build (argparse, gettext: ~2 ms)
        return
    parser = argparse.ArgumentParser(
        prog=AGENT_NAME,
        description="An Agent Client Protocol agent speaking JSON-RPC on stdin and stdout; "
        "started by an ACP client, not by hand.",
        epilog="Settings are DSH_* environment variables (DSH_SESSIONS_ROOT, DSH_STORE, "
        "DSH_MODEL_CLIENT, DSH_LOOP_PROFILE, ...; see the package README). Exit status: 0 after "
        f"a clean stop, {EXIT_USAGE} on bad usage or settings, {EXIT_REPLAY_NOT_CONSUMED} when "
        "a replay script was not consumed exactly.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.parse_args(argv)


def main() -> None:
    """Console entry point of ``dsh-acp-agent``; exits with the process's exit code."""
    _parse_command_line(sys.argv[1:])
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="dsh-acp-agent: %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings()
        wiring = build_agent(settings)
    except SettingsError as exc:
        print(f"dsh-acp-agent: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    except (DshError, OSError, ValueError) as exc:
        print(f"dsh-acp-agent: cannot start: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    rpc_fd = protect_stdout()
    raise SystemExit(asyncio.run(serve(wiring, rpc_fd)))
