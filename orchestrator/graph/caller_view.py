"""The caller's recent conversation, for the calls of agents with `state: parent`.

The router adds it to the tool task of each such call (see `graph.builder`), the
tools node puts it in the call's `RunContext.conversation`, and the agent's
`ask` starts its conversation with it (see `tools.agent_state`). Only those
calls carry it: a tool task is kept in the checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall
from langchain_core.tools import BaseTool
from langgraph.types import Send

from orchestrator.graph.model_pipeline.compaction import latest_within
from orchestrator.graph.node_support import TOOLS_NODE
from orchestrator.graph.state import OrchestratorState
from orchestrator.notes import note
from orchestrator.sources.adapter import ActionTool
from orchestrator.tools.agent import AgentTool

CALLER_NOTE = (
    "The recent conversation of the assistant that is asking you follows, for context; "
    "its request to you comes after it."
)
CALLER_VIEW = "caller_conversation"  # the note's kind

Route = Callable[[OrchestratorState], "list[Send] | str"]


def caller_view(messages: Sequence[BaseMessage], *, budget: int) -> list[BaseMessage]:
    """The text turns of `messages`, the latest within `budget` tokens, after a note saying
    what they are; none when there are none."""
    # Only the person's and the model's words go down. A model message's tool calls without
    # the results that answer them right after would be refused by providers (every call must
    # be answered), and the results are the caller's tools' business, not the agent's.
    turns: list[BaseMessage] = []
    for message in messages:
        if not message.text:
            continue
        if isinstance(message, HumanMessage):
            turns.append(HumanMessage(content=message.text, id=message.id))
        elif isinstance(message, AIMessage):
            turns.append(AIMessage(content=message.text, id=message.id))
    kept = latest_within(turns, budget=budget) if budget > 0 else []
    return [note(CALLER_NOTE, kind=CALLER_VIEW), *kept] if kept else []


class WithCallerViews:
    """`route`, the tasks of calls of agents with `state: parent` carrying the caller's view."""

    def __init__(self, route: Route, agents: dict[str, AgentTool]) -> None:
        self.route = route
        self.agents = agents  # by the name of their `ask` tool

    @classmethod
    def around(cls, route: Route, tools: Sequence[BaseTool]) -> Route:
        """`route` as it is when no tool is an agent's; else wrapped."""
        agents = {
            tool.name: tool.owner
            for tool in tools
            if isinstance(tool, ActionTool) and isinstance(tool.owner, AgentTool)
        }
        return cls(route, agents) if agents else route

    def __call__(self, state: OrchestratorState) -> list[Send] | str:
        sends = self.route(state)
        if isinstance(sends, str):
            return sends
        return [self._with_view(send, state) for send in sends]

    def _with_view(self, send: Send, state: OrchestratorState) -> Send:
        if send.node != TOOLS_NODE:  # a plan's task: the plan executor's, not a call
            return send
        task = cast("Mapping[str, object]", send.arg)  # a `ToolTask`, as the router made it
        call = cast("ToolCall", task["call"])
        agent = self.agents.get(call["name"])
        # Read at each call, not when the graph was built: the host sets it when it attaches.
        if agent is None or agent.state.mode != "parent":
            return send
        view = caller_view(state["messages"], budget=agent.state.caller_tokens)
        return Send(send.node, {**task, "conversation": view})
