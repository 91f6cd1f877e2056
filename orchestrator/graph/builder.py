"""Builds an agent graph: model node -> router -> tools node -> model node ...

The same builder serves the orchestrator and every nested agent: each level
gets its own model, tools and limits. A level that plans has the plan tool
too, and after the tools node accepted a plan, the plan executor (see
`graph.planning.executor`) runs its tasks before the model speaks again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import NotRequired, TypedDict

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph  # pyright: ignore[reportMissingTypeStubs]  # langgraph is a namespace package: its py.typed is not read
from langgraph.graph.state import CompiledStateGraph  # pyright: ignore[reportMissingTypeStubs]  # langgraph is a namespace package: its py.typed is not read
from langgraph.runtime import Runtime
from langgraph.types import Send

from orchestrator.dispatch.background import is_acknowledgement
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.events import BACKGROUND, Stage, ToolPhase, emit_status, emit_tool
from orchestrator.graph.caller_view import Route, WithCallerViews
from orchestrator.graph.calls import Rejection, refusal
from orchestrator.graph.closure import JUDGE_NODE, JudgeNode, judged, route_after_judge
from orchestrator.graph.history import valid_history
from orchestrator.graph.model_pipeline.defaults import model_chain
from orchestrator.graph.model_pipeline.model_call import (
    STOPPED,
    ModelCall,
    ModelHandler,
    StateUpdate,
)
from orchestrator.graph.node_support import MODEL_NODE, TOOLS_NODE, identified, run_context
from orchestrator.graph.planning.executor import (
    PLAN_NODE,
    PLAN_TASK_NODE,
    PlanNode,
    PlanTaskNode,
    route_plan,
)
from orchestrator.graph.planning.lifecycle import running
from orchestrator.graph.planning.plan_call import (
    accepted_plan,
    extra_plan_calls,
    plan_turn,
    revised_request,
)
from orchestrator.graph.planning.plan_tool import plan_tool
from orchestrator.graph.spec import AgentSpec
from orchestrator.graph.state import OrchestratorState, model_calls_this_turn
from orchestrator.llm.deferred import DeferredChatModel, resolved
from orchestrator.llm.providers import with_output_cap
from orchestrator.plans import PLAN_TOOL, Plan
from orchestrator.sources.result_reader import result_reader_tool
from orchestrator.tools.context import RunContext
from orchestrator.tools.results import HANDLE_MARK, READ_RESULT_TOOL

__all__ = [
    "MODEL_NODE", "STOPPED", "TOOLS_NODE", "AgentSpec", "build_agent_graph", "identified",
    "run_context",
]

logger = logging.getLogger(__name__)


class Bound:
    """The model bound to a level's tools: the usual ones, or with the reader of results kept
    by handle too (bound at its first use: most conversations never need it)."""

    def __init__(self, model: BaseChatModel, tools: Sequence[BaseTool]) -> None:
        self.model = model
        self.tools = tools
        usual = [tool for tool in tools if tool.name != READ_RESULT_TOOL]
        self.usual = model.bind_tools(usual) if usual else model
        self._reading: Runnable[LanguageModelInput, BaseMessage] | None = None

    @property
    def reading(self) -> Runnable[LanguageModelInput, BaseMessage]:
        """The model with every tool, the reader included."""
        if self._reading is None:
            self._reading = self.model.bind_tools(self.tools)
        return self._reading


def gave_handle(messages: Sequence[BaseMessage]) -> bool:
    """Whether `messages` tell of a result kept by handle (see `dispatch.large_results`): in a
    tool message, or in the report of a background job."""
    return any(HANDLE_MARK in message.text for message in reversed(messages))


# A level's model bound to its tools, and the chain its calls go through.
_ModelAndChain = tuple[Bound, ModelHandler]


class ModelNode:
    """Calls the model on the conversation through the agent's model chain.

    The chain (see `graph.model_pipeline.defaults`) adds the turn's context,
    ends the turn when a budget is spent, counts the call, checks the reply
    and limits tool rounds per turn; it is composed once, here. A round whose
    last message is a tool result goes to the spec's `tool_result_model` when
    it has one, through a chain of its own (its calls priced, counted and
    traced as that model's); the first round of a turn to `model`.
    """

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.tool_names = frozenset(tool.name for tool in spec.tools)
        self.system_prompt = SystemMessage(spec.system_prompt)
        self.plans = spec.planning is not None
        self._ready: dict[bool, _ModelAndChain] = {}
        models = (spec.model, spec.tool_result_model)
        if not any(isinstance(model, DeferredChatModel) for model in models):
            # What is wrong with them is said when the graph is built.
            self._model_and_chain(after_tools=False)
            self._model_and_chain(after_tools=True)

    def _model_and_chain(self, *, after_tools: bool) -> _ModelAndChain:
        """The model bound to the tools, and the chain around it; a deferred model built first."""
        cheaper = self.spec.tool_result_model if after_tools else None
        if cheaper is None:
            after_tools = False
        if after_tools not in self._ready:
            spec = self.spec
            summary = resolved(spec.summary_model or spec.model)
            chosen = resolved(cheaper or spec.model)
            spec = replace(spec, model=chosen, summary_model=summary, tool_result_model=None)
            model = with_output_cap(spec.model, spec.reply_limits.max_output_tokens)
            self._ready[after_tools] = (Bound(model, spec.tools), model_chain(spec))
        return self._ready[after_tools]

    async def __call__(
        self, state: OrchestratorState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        if self.plans and running(state.get("plan"), state["messages"]) is not None:
            # The tools node accepted a plan: the executor runs it (see `route_after_model`),
            # and the model speaks again when it ended. A step of no writes, at a plan's start
            # only: deciding after the tools node instead would cost every tool round one.
            return {}
        messages = valid_history(state["messages"], tool_names=self.tool_names)
        after_tools = bool(messages) and isinstance(messages[-1], ToolMessage)
        bound, chain = self._model_and_chain(after_tools=after_tools)
        # The reader is offered once a result was kept by handle, to read the rest of it.
        model = bound.reading if gave_handle(state["messages"]) else bound.usual
        iterations = model_calls_this_turn(state["messages"])
        stage = Stage.SUBMITTED if iterations == 0 else Stage.PROCESSING
        emit_status(stage, round=iterations + 1, messages=len(state["messages"]))
        request = ModelCall(
            model=model,
            system_message=self.system_prompt,
            messages=messages,
            state=state,
            run=run_context(runtime, config),
            config=config,
            iterations=iterations,
        )
        try:
            answer = await chain(request)
        except GraphBubbleUp:  # a middleware's interrupt: the turn pauses, it did not fail
            raise
        except Exception as error:
            emit_status(Stage.ERROR, type(error).__name__)
            raise
        response = answer.message
        if response.tool_calls:
            emit_status(Stage.EXECUTING, f"{len(response.tool_calls)} tool call(s)")
        else:
            emit_status(Stage.COMPLETE, answer.ended)
        return {
            **answer.update,
            **_rejections(answer.rejected, state),
            "messages": [identified(response)],
        }


class ToolTask(TypedDict):
    """What the router sends one tool task: a call of the last model message.

    `rejection` says why the call must not run (see `graph.calls`); `index`
    and `total` place it among the calls of its model turn. A plan call has
    the turn it is made in, and the failed plan of that turn it revises.
    """

    call: ToolCall
    rejection: Rejection | None
    index: int
    total: int
    turn: NotRequired[str | None]
    revising: NotRequired[Plan | None]
    # For a call of an agent with `state: parent`: the caller's recent text turns (see
    # `graph.caller_view`), which the agent's conversation starts with.
    conversation: NotRequired[list[BaseMessage]]


class ToolTaskNode:
    """Runs one tool call through the dispatch pipeline, as a LangGraph task of its own.

    One task per call: calls of one model turn run concurrently, each result
    is saved when its call ends, and a resumed turn runs only the calls that
    had not ended. An interrupt inside a call pauses the turn (LangGraph's
    `GraphBubbleUp` goes through untouched).
    """

    def __init__(self, dispatcher: Dispatcher, *, plans: bool = False) -> None:
        self.dispatcher = dispatcher
        self.plans = plans  # the level plans: an accepted plan call makes the plan to run

    async def __call__(
        self, task: ToolTask, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        call = task["call"]
        rejection = task["rejection"]
        if rejection is not None:
            return {"messages": [identified(self._refused(call, rejection, task))]}
        context = run_context(runtime, config)
        if conversation := task.get("conversation"):
            context = replace(context, conversation=tuple(conversation))
        request = self.dispatcher.request(
            call, context, index=task["index"], total=task["total"], config=config
        )
        planning = self.plans and call["name"] == PLAN_TOOL
        if planning:
            request = revised_request(request, task.get("revising"))
        request.emit(ToolPhase.STARTING)
        result = await self.dispatcher.dispatch(request)
        handed_over = is_acknowledgement(result)
        request.emit(ToolPhase.COMPLETED, status=BACKGROUND if handed_over else result.status)
        logger.info(
            "tool %s %s request_id=%s parent_request_id=%s",
            call["name"], result.status, result.request_id, result.parent_request_id,
            extra={
                "tool": call["name"],
                "status": result.status,
                "request_id": result.request_id,
                "parent_request_id": result.parent_request_id,
            },
        )
        if planning:
            plan = accepted_plan(
                result, call=call, revising=task.get("revising"), turn=task.get("turn"),
                under=context.request_id,
            )
            if plan is not None:  # the plan runs; its end answers the call
                return {"plan": plan}
        return {"messages": [identified(self.dispatcher.message(call, result))]}

    def _refused(self, call: ToolCall, rejection: Rejection, task: ToolTask) -> ToolMessage:
        message = refusal(call, rejection, max_chars=self.dispatcher.limits.max_result_chars)
        request_id = message.artifact["request_id"]
        for phase, status in ((ToolPhase.STARTING, None), (ToolPhase.COMPLETED, "failure")):
            emit_tool(
                phase,
                tool=call["name"],
                index=task["index"],
                total=task["total"],
                request_id=request_id,
                status=status,
            )
        return message


def route_after_model(state: OrchestratorState) -> list[Send] | str:
    """One tool task per call while the model asks for tools; the end of the turn when it answers.

    A plan call is told its turn and the plan it may revise; a second plan call of
    the same message does not run. While an accepted plan runs, its tasks go to the
    plan executor (see `graph.planning.executor`).
    """
    if running(state.get("plan"), state["messages"]) is not None:
        return route_plan(state)
    last = state["messages"][-1]
    if not isinstance(last, AIMessage) or not last.tool_calls:
        return END
    calls = last.tool_calls
    rejected = state.get("rejected_calls") or {}
    planned = None
    if any(call["name"] == PLAN_TOOL for call in calls):
        rejected = {**extra_plan_calls(last), **rejected}
        planned = plan_turn(state["messages"], state.get("plan"))
    sends: list[Send] = []
    for i, call in enumerate(calls, start=1):
        task = ToolTask(call=call, rejection=rejected.get(call["id"] or ""), index=i, total=len(calls))
        if planned is not None and call["name"] == PLAN_TOOL:
            turn, revising = planned
            task.update(turn=turn, revising=revising)
        sends.append(Send(TOOLS_NODE, task))
    return sends


def _judged(route: Route) -> Route:
    """`route`, the answer going to the judge (see `graph.closure`)."""

    def judged_route(state: OrchestratorState) -> list[Send] | str:
        return judged(route(state))

    return judged_route


# A compiled agent graph: its state in and out, run with a `RunContext`.
AgentGraph = CompiledStateGraph[OrchestratorState, RunContext, OrchestratorState, OrchestratorState]
AgentStateGraph = StateGraph[OrchestratorState, RunContext, OrchestratorState, OrchestratorState]


def build_agent_graph(
    spec: AgentSpec, *, checkpointer: BaseCheckpointSaver[str] | None = None
) -> AgentGraph:
    """Compile the agent graph of `spec`: its model node, router and tools node (and the plan
    executor's nodes when it plans)."""
    planning = spec.planning
    if planning is not None:
        spec = replace(spec, tools=[*spec.tools, plan_tool(spec.tools, planning)])
    # Known at every level (it runs and validates as any tool); offered once a handle was given.
    if all(tool.name != READ_RESULT_TOOL for tool in spec.tools):
        reader = result_reader_tool(max_chars=spec.limits.max_result_chars)
        spec = replace(spec, tools=[*spec.tools, reader])
    graph = StateGraph(OrchestratorState, context_schema=RunContext)
    _add_node(graph, MODEL_NODE, ModelNode(spec))
    dispatcher = Dispatcher(spec.tools, limits=spec.limits, middleware=spec.tool_middleware())
    tools_node = ToolTaskNode(dispatcher, plans=planning is not None)
    _add_node(graph, TOOLS_NODE, tools_node, input_schema=OrchestratorState)
    graph.add_edge(START, MODEL_NODE)
    graph.add_edge(TOOLS_NODE, MODEL_NODE)
    # Two steps per round, and the final answer: the tool-round limit ends first.
    steps = 2 * spec.limits.max_iterations + 5
    route, ends = WithCallerViews.around(route_after_model, spec.tools), [END]
    if spec.closure is not None:  # the answer goes to the judge, who may send it back
        route, ends = _judged(route), [JUDGE_NODE]
        _add_node(graph, JUDGE_NODE, JudgeNode(spec, spec.closure))
        graph.add_conditional_edges(JUDGE_NODE, route_after_judge, [MODEL_NODE, END])
        steps = (steps + 1) * (spec.closure.max_rounds + 1)
    if planning is None:
        graph.add_conditional_edges(MODEL_NODE, route, [TOOLS_NODE, *ends])
    else:
        executor = [PLAN_TASK_NODE, PLAN_NODE]
        graph.add_conditional_edges(MODEL_NODE, route, [TOOLS_NODE, *executor, *ends])
        plan_task = PlanTaskNode(dispatcher)
        _add_node(graph, PLAN_TASK_NODE, plan_task, input_schema=OrchestratorState)
        _add_node(graph, PLAN_NODE, PlanNode(planning, max_result_chars=spec.limits.max_result_chars))
        graph.add_edge(PLAN_TASK_NODE, PLAN_NODE)
        graph.add_conditional_edges(PLAN_NODE, route_plan, [PLAN_TASK_NODE, MODEL_NODE, END])
        # Each plan and re-plan: its start, two steps per round of tasks (a task each at
        # most), and its end.
        steps += (2 * planning.max_tasks + 3) * (planning.max_replans + 1)
    # `compile`'s signature holds a `CachePolicy` of an unknown key type (LangGraph's).
    compiled = graph.compile(checkpointer=checkpointer, name=spec.name)  # pyright: ignore[reportUnknownMemberType]
    return compiled.with_config(recursion_limit=steps)


def _add_node(
    graph: AgentStateGraph,
    name: str,
    node: Callable[..., Awaitable[object]],
    *,
    input_schema: type[OrchestratorState] | None = None,
) -> None:
    """`graph.add_node` for a node that takes `config` and `runtime` by name, as LangGraph passes them.

    Its node protocols have a shape with a config and one with the runtime, none
    with both; and `add_node`'s signature holds a `CachePolicy` of an unknown key type.
    """
    graph.add_node(name, node, input_schema=input_schema)  # pyright: ignore[reportArgumentType, reportCallIssue, reportUnknownMemberType]  # see the docstring


def _rejections(rejected: dict[str, Rejection], state: OrchestratorState) -> StateUpdate:
    """The update of `rejected_calls`: none when it stays empty (a checkpoint write less)."""
    return {"rejected_calls": rejected} if rejected or state.get("rejected_calls") else {}
