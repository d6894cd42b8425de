"""A foreign ACP agent that puts its world into its requests, as real third-party agents do.

Test agent of the dsh-snapshot tests (not part of any package): its system prompt names its
working directory, ``HOME``, ``TMPDIR``, today's date and a random build id; it answers
``session/prompt`` with a random ``_meta.durationMs``; it sends ``available_commands_update``
before or after its answer at random; it has two tools of its own: ``read_file`` (a path
relative to its cwd; the result names the absolute path) and ``task``, which starts a
sub-agent (a fresh conversation with the task's prompt). Its model calls go to
``OPENAI_BASE_URL`` through the ``openai`` SDK.
"""

# It implements the ACP methods a scenario drives, as third-party agents do; the protocol's
# others (list_sessions, fork_session…) are answered "method not found" by the library.
# pyright: reportAbstractUsage=false

from __future__ import annotations

import asyncio
import datetime
import json
import os
import random
import secrets
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    text_block,
    update_agent_message,
)
from acp.helpers import update_available_commands
from acp.interfaces import Client
from acp.schema import (
    AcpMcpServer,
    AudioContentBlock,
    AvailableCommand,
    ClientCapabilities,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    McpServerStdio,
    ResourceContentBlock,
    SseMcpServer,
    TextContentBlock,
)
from openai import AsyncOpenAI, omit

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the working directory.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "task",
            "description": "Hand a task to a sub-agent; returns its answer.",
            "parameters": {
                "type": "object",
                "properties": {"prompt": {"type": "string"}},
                "required": ["prompt"],
            },
        },
    },
]


def _system() -> str:
    return (
        f"You are Worldly. Working directory: {Path.cwd()}. Home: {os.environ.get('HOME')}. "
        f"Temp: {os.environ.get('TMPDIR')}. Today is {datetime.date.today().isoformat()}. "
        f"Build build-{secrets.token_hex(4)}."
    )


class WorldlyAgent(Agent):
    _conn: Client

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio]
        | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        return NewSessionResponse(session_id="worldly-session")

    async def _commands(self, session_id: str) -> None:
        command = AvailableCommand(name="init", description="Start a project")
        await self._conn.session_update(session_id, update_available_commands([command]))

    async def _run(self, client: AsyncOpenAI, messages: list[dict[str, Any]], tools: bool) -> str:
        while True:
            reply = await client.chat.completions.create(
                model=os.environ.get("OPENAI_MODEL", "worldly-model"),
                messages=cast(Any, messages),
                tools=cast(Any, TOOLS) if tools else omit,
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                if call.type != "function":
                    continue
                args = json.loads(call.function.arguments)
                if call.function.name == "read_file":
                    path = Path.cwd() / args["path"]
                    result = f"{path}: {path.read_text(encoding='utf-8')}"
                else:
                    child = [
                        {"role": "system", "content": "You are a sub-agent. " + _system()},
                        {"role": "user", "content": args["prompt"]},
                    ]
                    result = await self._run(client, child, tools=False)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    async def prompt(
        self,
        session_id: str,
        prompt: list[
            TextContentBlock
            | ImageContentBlock
            | AudioContentBlock
            | ResourceContentBlock
            | EmbeddedResourceContentBlock
        ],
        **kwargs: Any,
    ) -> PromptResponse:
        commands_first = random.random() < 0.5
        if commands_first:
            await self._commands(session_id)
        text = "".join(b.text for b in prompt if isinstance(b, TextContentBlock))
        client = AsyncOpenAI(max_retries=0)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": _system()},
            {"role": "user", "content": text},
        ]
        answer = await self._run(client, messages, tools=True)
        await self._conn.session_update(session_id, update_agent_message(text_block(answer)))
        if not commands_first:
            await self._commands(session_id)
        return PromptResponse(
            stop_reason="end_turn", field_meta={"durationMs": random.randint(1, 10_000)}
        )


if __name__ == "__main__":
    asyncio.run(run_agent(WorldlyAgent()))
