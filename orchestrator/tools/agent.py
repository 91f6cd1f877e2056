"""Agent-type tools: a free-text `ask` action that runs the agent's own graph over its own tools.

The host builds the graph (with the same builder as the orchestrator's, through
a `GraphFactory`) and attaches it; this module imports no LangChain until an
agent is asked something, so listing or showing tool folders stays light.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, NotRequired, Protocol, TypedDict, cast

from pydantic import BaseModel, Field, PrivateAttr

from orchestrator.errors import ModelUnavailableError, OrchestratorError, ToolError
from orchestrator.plans import PLAN_METADATA, plan_view
from orchestrator.tools.agent_state import AgentState, SavedConversation
from orchestrator.tools.base import Tool, ToolRequest, action
from orchestrator.tools.context import RunContext, UserDatabase, current_context
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import Attribute, span

if TYPE_CHECKING:
    from langchain_core.messages import AnyMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import (  # pyright: ignore[reportMissingTypeStubs]  # langgraph is a namespace package: its py.typed is not seen
        CompiledStateGraph,
    )

    from orchestrator.levels import LevelConfig
    from orchestrator.plans import Plan

    # The state schema is the graph layer's `OrchestratorState`, a layer above this one: this
    # layer hands it messages and reads `AgentReply` back, so the state stays open here.
    AgentGraph = CompiledStateGraph[Any, RunContext, Any, Any]

logger = logging.getLogger(__name__)

NOT_KEPT = "%s: this call's exchange was not kept in its standalone conversation: %s: %s"

AGENT_PROMPT = """\
You are {name}, an agent that {description}. Another assistant hands you requests \
in plain words. Use your tools to carry them out, then reply with a short report of \
what you did and the results, including any ids, values or failures."""


class GraphFactory(Protocol):
    """Builds the graph of one agent's level: its model and limits, its tools, its prompt."""

    def __call__(
        self, level: LevelConfig, tools: Sequence[BaseTool], *, name: str, system_prompt: str
    ) -> AgentGraph: ...


class AgentReply(TypedDict):
    """What this layer reads of an agent graph's final state (`summary`: what compaction wrote,
    see `graph.state.Summary`)."""

    messages: list[AnyMessage]
    plan: NotRequired[Plan | None]
    summary: NotRequired[dict[str, object]]


class AskParams(BaseModel):
    request: str = Field(
        min_length=1, description="What to do, in plain words, with every detail it needs."
    )


class AgentTool(Tool):
    """A tool that is itself an agent: the host attaches its graph over its own tools.

    Subclasses may set `instructions` to change the agent's system prompt; a
    folder's `tool_config.yaml` may too (`instructions:`), and then needs no
    subclass at all. `{name}` and `{description}` in it are filled in.
    """

    instructions: ClassVar[str] = AGENT_PROMPT
    _graph: AgentGraph | None = PrivateAttr(default=None)
    _tools: list[BaseTool] = PrivateAttr(default_factory=list)
    _state: AgentState = PrivateAttr(default_factory=AgentState)

    def system_prompt(self, instructions: str | None = None) -> str:
        """The system prompt: `instructions` (else the class's), with its name and description.

        Only `{name}` and `{description}` are replaced: any other braces (a JSON
        example, say) stay as they are.
        """
        template = instructions if instructions is not None else self.instructions
        description = self.description.rstrip(".").lower()
        return template.replace("{name}", self.name).replace("{description}", description)

    def attach(
        self, *, graph: AgentGraph, tools: Sequence[BaseTool], state: AgentState | None = None
    ) -> None:
        """Give the agent its graph, the tools of the level below it (which the graph runs),
        and its `state:` (default: `local`)."""
        self._graph = graph
        self._tools = list(tools)
        if state is not None:
            self._state = state

    @property
    def state(self) -> AgentState:
        """What conversation each call starts from (see `tools.agent_state`)."""
        return self._state

    def _agent_attributes(self) -> dict[str, Attribute | None]:
        return {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.name,
            "gen_ai.agent.description": self.description or None,
        }

    @property
    def tools(self) -> list[BaseTool]:
        """The tools of the level below this agent."""
        return self._tools

    @action(AskParams)
    async def ask(self, params: AskParams, request: ToolRequest) -> ToolResult:
        """Hand this agent a request in plain words; it uses its own tools and reports back."""
        from langchain_core.messages import AIMessage

        if self._graph is None:
            raise OrchestratorError(f"agent {self.name} has no graph: the host never attached it")
        caller = current_context()
        context = self._nested_context(request)
        store = self._state.store if self._state.mode == "standalone" else None
        if store is None:
            # `parent`: the caller's recent conversation first (the tools node put it in the
            # call's context); `local`: the request alone.
            seed = SavedConversation(caller.conversation if caller is not None else ())
            state = await self._run(params.request, seed, request=request, context=context)
        else:
            async with self._state.lock(context.user_id):
                seed = await store.load(context.user_id, context.agent_path)
                state = await self._run(params.request, seed, request=request, context=context)
                try:
                    await store.save(context.user_id, context.agent_path, _kept(state))
                except Exception as error:  # noqa: BLE001 - the answer stands: said, not lost
                    logger.warning(NOT_KEPT, self.name, type(error).__name__, error)
        calls = [
            call["name"]
            for message in state["messages"][len(seed.messages) :]  # this call's, not the seed's
            if isinstance(message, AIMessage)
            for call in message.tool_calls
        ]
        plan = state.get("plan")
        # For the person's views (its task's line, `ask --json`); the model above reads the report.
        metadata: dict[str, object] = {PLAN_METADATA: plan_view(plan)} if plan else {}
        return request.result(
            state["messages"][-1].text, data={"tool_calls": calls}, metadata=metadata
        )

    async def _run(
        self, text: str, seed: SavedConversation, *, request: ToolRequest, context: RunContext
    ) -> AgentReply:
        """The agent's graph run on `seed`'s conversation and the request `text`."""
        from langchain_core.messages import HumanMessage

        assert self._graph is not None  # `ask` checked
        start: dict[str, object] = {"messages": [*seed.messages, HumanMessage(text)]}
        if seed.summary is not None:
            start["summary"] = dict(seed.summary)
        try:
            # By the GenAI conventions an agent's run is an `invoke_agent` span (below the
            # call's `execute_tool`): its model and tool calls are its children.
            with span(f"invoke_agent {self.name}", self._agent_attributes()):
                # LangGraph types a graph's result `dict[str, Any]`; an agent graph's is its state.
                return cast(
                    "AgentReply",
                    await self._graph.ainvoke(  # pyright: ignore[reportUnknownMemberType]  # langgraph's own signature takes a bare `Command`
                        start, _nested_config(request), context=context
                    ),
                )
        except Exception as error:  # LangGraph's GraphBubbleUp is no model failure: re-raised
            failure = _model_failure(error)
            if failure is None:
                raise
            raise failure from error

    def _nested_context(self, request: ToolRequest) -> RunContext:
        # The agent's own calls take this call as their parent and add its name to the
        # agent path; the rest of the run's context (user, session, observer,
        # background runner) carries on below,
        # but for the database when this agent's level has one of its own (`db: local`).
        context = current_context()
        if context is not None:
            nested = context.below(request.request_id)
        else:
            nested = RunContext(
                user_id=request.user_id or "",
                session_id=request.session_id,
                request_id=request.request_id,
            )
        own = self._context.database if self._context is not None else None
        if own is not None and (nested.database is None or nested.database.database is not own):
            nested = replace(nested, database=UserDatabase(own, nested.user_id))
        # The caller's conversation was this call's alone: the calls below get their own.
        nested = replace(nested, conversation=())
        return nested.inside(self.name)  # who asks, when a call below asks the person


def _kept(state: AgentReply) -> SavedConversation:
    """What a standalone agent keeps of its run: the messages its summary does not stand for
    (compaction summarised the others), and the summary; so it never grows past its window."""
    from orchestrator.llm.summary import after_summary

    summary = state.get("summary")
    upto = summary.get("upto") if summary else None
    messages = after_summary(state["messages"], upto if isinstance(upto, str) else None)
    return SavedConversation(tuple(messages), summary)


def _model_failure(error: Exception) -> ToolError | None:
    """The agent's model failing, in one line for the model above (None: not a model failure)."""
    from orchestrator.llm.model_errors import explain_model_error

    # Already one line (a reply that outlasted its timeout, or came cut): told as it is.
    explained = error if isinstance(error, ModelUnavailableError) else explain_model_error(error)
    return None if explained is None else ToolError(str(explained), recoverable=True)


def _nested_config(request: ToolRequest) -> RunnableConfig:
    # Inside a graph run the current config makes this graph a subgraph (its
    # events and checkpoints nest under the caller's); outside, it stands alone.
    from langchain_core.runnables import ensure_config

    config = ensure_config()
    configurable = dict(config.get("configurable", {}))
    configurable.setdefault("thread_id", request.session_id)
    # LangSmith's runs of the agent carry the call that asked it.
    ids = {"request_id": request.request_id, "parent_request_id": request.parent_request_id}
    metadata = {**config.get("metadata", {}), **{k: v for k, v in ids.items() if v is not None}}
    return {**config, "configurable": configurable, "metadata": metadata}
