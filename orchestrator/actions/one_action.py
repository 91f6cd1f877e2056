"""One action as a graph of one node, so that its questions pause and resume as a chat's do.

`orchestrator run` runs an action here: a sensitive action's approval is asked
through LangGraph's `interrupt()`, read by the command from the person, and
answered with `Command(resume=...)`, the answers the chat already uses.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import NotRequired, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from orchestrator.actions.action_runner import RUN_PREFIX, ActionRunner
from orchestrator.actions.address import Address
from orchestrator.conversation.turns import PendingQuestion, questions_of
from orchestrator.tools.context import RunContext
from orchestrator.tools.envelope import Envelope
from orchestrator.tools.hitl import Decision

Answer = Callable[[list[PendingQuestion]], Awaitable[dict[str, Decision]]]


class OneAction(TypedDict):
    """The graph's state: the action's arguments in, its envelope out."""

    arguments: dict[str, object]
    envelope: NotRequired[dict[str, object]]


class Ran(TypedDict):
    """What the action's node writes into the state."""

    envelope: dict[str, object]


async def run_one(
    runner: ActionRunner,
    address: Address,
    arguments: Mapping[str, object],
    *,
    answer: Answer,
    context: RunContext | None = None,
) -> Envelope:
    """Run the action; each time it asks, `answer` gives the person's decisions, and it goes on.

    `context`: the run's (its session, its meter); default: a new one.
    """
    context = context or runner.context(f"{RUN_PREFIX}{uuid.uuid4().hex}")
    session = context.session_id or ""

    async def step(state: OneAction, config: RunnableConfig) -> Ran:
        envelope = await runner.run(address, state["arguments"], context=context, config=config)
        return {"envelope": envelope.model_dump(mode="json")}

    builder = StateGraph(OneAction)
    builder.add_node("action", step)
    builder.add_edge(START, "action")
    builder.add_edge("action", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": session}}
    await graph.ainvoke({"arguments": dict(arguments)}, config)
    state = await graph.aget_state(config)
    while state.interrupts:
        decisions = await answer(questions_of(state))
        await graph.ainvoke(Command(resume=decisions), config)
        state = await graph.aget_state(config)
    return Envelope.model_validate(state.values["envelope"])
