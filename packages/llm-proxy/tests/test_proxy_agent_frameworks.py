"""Agent frameworks nobody here wrote, through the proxy: pydantic-ai delegating to a
sub-agent (and forking a conversation), the OpenAI Agents SDK handing off. Each is recorded
against the scripted upstream, replayed with it stopped, and must give identical outputs; the
recorded logs must form the expected session tree."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import agents
import openai
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from dsh_core import Chunk


def _pydantic_model(base_url: str, client: openai.AsyncOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("deepseek-flash", provider=OpenAIProvider(openai_client=client))


async def _delegate_then_fork(base_url: str) -> dict[str, Any]:
    async with openai.AsyncOpenAI(
        base_url=base_url, api_key="dummy-client-key", max_retries=0
    ) as client:
        model = _pydantic_model(base_url, client)
        researcher = Agent(model, instructions="You research one question and answer briefly.")
        lead = Agent(model, instructions="You delegate research to the researcher tool.")

        @lead.tool
        async def research(ctx: RunContext[object], question: str) -> str:  # pyright: ignore[reportUnusedFunction]
            """Ask the researcher a question."""
            answer = await researcher.run(question, usage=ctx.usage)
            return answer.output

        first = await lead.run("How tall is the tower?")
        history = first.all_messages()
        second = await lead.run("In feet?", message_history=history)
        forked = await lead.run("In metres, rounded?", message_history=history)
        return {"first": first.output, "second": second.output, "forked": forked.output}


def test_pydantic_ai_delegation_and_a_fork(
    roundtrip: Any,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    lead = [
        make_tool_calls(("call_r1", "research", {"question": "Height of the tower?"})),
        make_text(["It ", "is ", "330 m."]),
        make_text(["About ", "1083 ft."]),
    ]
    researcher = [make_text(["330 ", "metres."])]
    fork = [make_text(["330 m."])]

    def run(base_url: str) -> dict[str, Any]:
        return asyncio.run(_delegate_then_fork(base_url))

    result = roundtrip([lead, researcher, fork], run)
    assert result.recorded == result.replayed
    assert result.recorded == {
        "first": "It is 330 m.",
        "second": "About 1083 ft.",
        "forked": "330 m.",
    }
    lead_h, researcher_h, fork_h = result.headers()
    assert lead_h.parent_session is None
    # The researcher shares nothing and starts while the lead waits on its tool call.
    assert researcher_h.parent_session == lead_h.id
    assert researcher_h.seed_length is None
    assert researcher_h.origin == "subagent"
    # The fork restarts from the lead's first completed turn.
    lead_events = result.events(lead_h.id)
    first_turn_end = next(e.seq for e in lead_events if e.type == "turn/end")
    assert fork_h.parent_session == lead_h.id
    assert fork_h.seed_length == first_turn_end + 1


def test_openai_agents_sdk_handoff(
    roundtrip: Any,
    make_text: Callable[..., list[Chunk]],
    make_tool_calls: Callable[..., list[Chunk]],
) -> None:
    triage_script = [make_tool_calls(("call_h1", "transfer_to_billing_agent", {}))]
    billing_script = [make_text(["Your ", "refund ", "is ", "on ", "its ", "way."])]

    async def handoff(base_url: str) -> str:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key="dummy-client-key", max_retries=0
        ) as client:
            model = agents.OpenAIChatCompletionsModel(model="deepseek-flash", openai_client=client)
            billing = agents.Agent(
                name="Billing agent", instructions="You handle refunds.", model=model
            )
            triage = agents.Agent(
                name="Triage agent",
                instructions="Hand billing questions to the billing agent.",
                handoffs=[billing],
                model=model,
            )
            result = await agents.Runner.run(
                triage,
                "I want a refund.",
                run_config=agents.RunConfig(tracing_disabled=True),
            )
            return str(result.final_output)

    def run(base_url: str) -> str:
        agents.set_tracing_disabled(True)
        return asyncio.run(handoff(base_url))

    result = roundtrip([triage_script, billing_script], run)
    assert result.recorded == result.replayed == "Your refund is on its way."
    triage_h, billing_h = result.headers()
    assert billing_h.parent_session == triage_h.id
    assert billing_h.seed_length is None
    calls = [e.data["name"] for e in result.events(triage_h.id) if e.type == "tool/call"]
    assert calls == ["transfer_to_billing_agent"]
