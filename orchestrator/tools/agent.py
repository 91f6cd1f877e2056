"""Agent-type tools: a free-text `ask` action that runs the agent's own graph over its own tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field, PrivateAttr

from orchestrator.errors import OrchestratorError
from orchestrator.tools.base import Tool, ToolRequest, action
from orchestrator.tools.results import ToolResult

AGENT_PROMPT = """\
You are {name}, an agent that {description}. Another assistant hands you requests \
in plain words. Use your tools to carry them out, then reply with a short report of \
what you did and the results, including any ids, values or failures."""


class AskParams(BaseModel):
    request: str = Field(
        min_length=1, description="What to do, in plain words, with every detail it needs."
    )


class AgentTool(Tool):
    """A tool that is itself an agent: the host attaches its model and its own tools.

    Subclasses may set `instructions` (with `{name}` and `{description}`) to
    change the agent's system prompt.
    """

    instructions: ClassVar[str] = AGENT_PROMPT
    _graph: CompiledStateGraph | None = PrivateAttr(default=None)
    _tools: list[BaseTool] = PrivateAttr(default_factory=list)

    def attach(
        self,
        *,
        model: BaseChatModel,
        tools: Sequence[BaseTool],
        max_iterations: int,
        max_result_chars: int,
        tool_timeout_seconds: float = 60.0,
        inline_budget_seconds: float | None = None,
    ) -> None:
        """Build the agent's graph with the same builder as the orchestrator's."""
        from orchestrator.graph.builder import build_agent_graph  # the graph imports this package

        self._tools = list(tools)
        self._graph = build_agent_graph(
            model=model,
            tools=tools,
            max_iterations=max_iterations,
            max_result_chars=max_result_chars,
            system_prompt=self.instructions.format(
                name=self.name, description=self.description.rstrip(".").lower()
            ),
            tool_timeout_seconds=tool_timeout_seconds,
            inline_budget_seconds=inline_budget_seconds,
            name=self.name,
        )

    @property
    def tools(self) -> list[BaseTool]:
        """The tools of the level below this agent."""
        return self._tools

    @action(AskParams)
    async def ask(self, params: AskParams, request: ToolRequest) -> ToolResult:
        """Hand this agent a request in plain words; it uses its own tools and reports back."""
        if self._graph is None:
            raise OrchestratorError(f"agent {self.name} has no graph: the host never attached it")
        state = await self._graph.ainvoke(
            {"messages": [HumanMessage(params.request)], "iterations": 0},
            _nested_config(request),
        )
        calls = [
            call["name"]
            for message in state["messages"]
            if isinstance(message, AIMessage)
            for call in message.tool_calls
        ]
        return request.result(state["messages"][-1].text, data={"tool_calls": calls})


def _nested_config(request: ToolRequest) -> RunnableConfig:
    # Inside a graph run the current config makes this graph a subgraph (its
    # events and checkpoints nest under the caller's); outside, it stands alone.
    # Either way its tool calls take this request as their parent.
    config = ensure_config()
    configurable = {
        **config.get("configurable", {}),
        "request_id": request.request_id,
        "parent_request_id": request.parent_request_id,
        "user_id": request.user_id,
        "thread_id": config.get("configurable", {}).get("thread_id", request.session_id),
    }
    return {**config, "configurable": configurable}
