"""RAG context in the model node: looked up once per turn, without a super-step of its own."""

from __future__ import annotations

import asyncio
import logging

from langchain_core.messages import SystemMessage
from langchain_core.tools import tool

from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.levels import Limits
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.tools.context import RunContext

LIMITS = Limits(max_iterations=3, max_result_chars=4000, timeout_seconds=60.0)
FOUND = "Context retrieved: the user likes teal."


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


class CountingRetriever:
    def __init__(self, *, fails: bool = False) -> None:
        self.queries: list[str] = []
        self.fails = fails

    async def __call__(self, query: str, *, user_id: str, session_id: str) -> str:
        self.queries.append(query)
        if self.fails:
            raise ConnectionError("database gone")
        return FOUND


def contexts(model: ScriptedChatModel) -> list[list[str]]:
    """The RAG context each model call received."""
    return [
        [m.text for m in call if isinstance(m, SystemMessage) and m.text == FOUND]
        for call in model.received
    ]


async def run(retriever: CountingRetriever, *, context: RunContext | None = None):
    model = ScriptedChatModel(steps=[call_tools(("noop", {})), "Teal it is."])
    graph = build_agent_graph(
        AgentSpec(model=model, tools=[noop], limits=LIMITS, retriever=retriever)
    )
    state = await graph.ainvoke(
        {"messages": [("user", "what colour?")]},
        context=context or RunContext(user_id="u"),
    )
    return graph, model, state


async def test_context_is_looked_up_once_and_reaches_every_model_call_of_the_turn():
    retriever = CountingRetriever()

    graph, model, state = await run(retriever)

    assert retriever.queries == ["what colour?"]
    assert contexts(model) == [[FOUND], [FOUND]]
    assert state["messages"][-1].text == "Teal it is."
    assert set(graph.get_graph().nodes) == {"__start__", "__end__", "model", "tools"}


async def test_a_lookup_the_session_started_is_used_instead():
    retriever = CountingRetriever()
    lookup = asyncio.get_running_loop().create_future()
    lookup.set_result(FOUND)

    _, model, _ = await run(retriever, context=RunContext(user_id="u", lookup=lookup))

    assert retriever.queries == [] and contexts(model) == [[FOUND], [FOUND]]


async def test_a_failed_lookup_costs_no_answer(caplog):
    with caplog.at_level(logging.WARNING, logger="orchestrator.graph.builder"):
        _, model, state = await run(CountingRetriever(fails=True))

    assert state["messages"][-1].text == "Teal it is." and contexts(model) == [[], []]
    assert "RAG lookup failed: ConnectionError: database gone" in caplog.text
