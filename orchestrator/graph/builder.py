"""Builds an agent graph: model node -> router -> tools node -> model node ...

The same builder serves the orchestrator and every nested agent: each level
gets its own model, tools and limits.
"""

from __future__ import annotations

import logging
import uuid
from typing import TypedDict, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from orchestrator.dispatch.background import is_acknowledgement
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.events import BACKGROUND, Stage, ToolPhase, emit_status, emit_tool
from orchestrator.graph.calls import Rejection, refusal
from orchestrator.graph.history import valid_history
from orchestrator.graph.model_pipeline.chain import STOPPED, ModelCall, StateUpdate
from orchestrator.graph.model_pipeline.defaults import model_chain
from orchestrator.graph.spec import AgentSpec
from orchestrator.graph.state import AgentState, model_calls_this_turn
from orchestrator.tools.context import RunContext

__all__ = ["MODEL_NODE", "STOPPED", "TOOLS_NODE", "AgentSpec", "build_agent_graph"]

MODEL_NODE = "model"
TOOLS_NODE = "tools"

logger = logging.getLogger(__name__)
Message = TypeVar("Message", bound=BaseMessage)


class ModelNode:
    """Calls the model on the conversation through the agent's model chain.

    The chain (see `graph.model_pipeline.defaults`) adds the turn's context,
    ends the turn when a budget is spent, counts the call, checks the reply
    and limits tool rounds per turn; it is composed once, here.
    """

    def __init__(self, spec: AgentSpec) -> None:
        self.model: Runnable = spec.model.bind_tools(spec.tools) if spec.tools else spec.model
        self.tool_names = frozenset(tool.name for tool in spec.tools)
        self.system_prompt = SystemMessage(spec.system_prompt)
        self.chain = model_chain(spec)

    async def __call__(
        self, state: AgentState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        iterations = model_calls_this_turn(state["messages"])
        emit_status(Stage.SUBMITTED if iterations == 0 else Stage.PROCESSING)
        request = ModelCall(
            model=self.model,
            system_message=self.system_prompt,
            messages=valid_history(state["messages"], tool_names=self.tool_names),
            state=state,
            run=run_context(runtime, config),
            config=config,
            iterations=iterations,
        )
        try:
            answer = await self.chain(request)
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
    and `total` place it among the calls of its model turn.
    """

    call: ToolCall
    rejection: Rejection | None
    index: int
    total: int


class ToolTaskNode:
    """Runs one tool call through the dispatch pipeline, as a LangGraph task of its own.

    One task per call: calls of one model turn run concurrently, each result
    is saved when its call ends, and a resumed turn runs only the calls that
    had not ended. An interrupt inside a call pauses the turn (LangGraph's
    `GraphBubbleUp` goes through untouched).
    """

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def __call__(
        self, task: ToolTask, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        call = task["call"]
        rejection = task["rejection"]
        if rejection is not None:
            return {"messages": [identified(self._refused(call, rejection, task))]}
        request = self.dispatcher.request(
            call,
            run_context(runtime, config),
            index=task["index"],
            total=task["total"],
            config=config,
        )
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
        return {"messages": [identified(self.dispatcher.message(call, result))]}

    def _refused(self, call: ToolCall, rejection: Rejection, task: ToolTask) -> ToolMessage:
        message = refusal(call, rejection, max_chars=self.dispatcher.limits.max_result_chars)
        progress = {
            "tool": call["name"], "index": task["index"], "total": task["total"],
            "request_id": message.artifact["request_id"],
        }
        emit_tool(ToolPhase.STARTING, **progress)
        emit_tool(ToolPhase.COMPLETED, status="failure", **progress)
        return message


def route_after_model(state: AgentState) -> list[Send] | str:
    """One tool task per call while the model asks for tools; the end of the turn when it answers."""
    last = state["messages"][-1]
    calls = last.tool_calls if isinstance(last, AIMessage) else []
    if not calls:
        return END
    rejected = state.get("rejected_calls") or {}
    return [
        Send(
            TOOLS_NODE,
            ToolTask(call=call, rejection=rejected.get(call["id"] or ""), index=i, total=len(calls)),
        )
        for i, call in enumerate(calls, start=1)
    ]


def run_context(runtime: Runtime[RunContext] | None, config: RunnableConfig) -> RunContext:
    """The run's context; a graph run without one (a bare `ainvoke`) gets one from its config."""
    if runtime is not None and runtime.context is not None:
        return runtime.context
    configurable = config.get("configurable", {})
    session = configurable.get("thread_id")
    return RunContext(
        user_id=str(configurable.get("user_id") or "anonymous"),
        session_id=None if session is None else str(session),
    )


def build_agent_graph(
    spec: AgentSpec, *, checkpointer: BaseCheckpointSaver | None = None
) -> CompiledStateGraph:
    """Compile the agent graph of `spec`: its model node, router and tools node."""
    graph = StateGraph(AgentState, context_schema=RunContext)
    graph.add_node(MODEL_NODE, ModelNode(spec))
    dispatcher = Dispatcher(spec.tools, limits=spec.limits, middleware=spec.tool_middleware)
    graph.add_node(TOOLS_NODE, ToolTaskNode(dispatcher), input_schema=AgentState)  # type: ignore[arg-type]
    graph.add_edge(START, MODEL_NODE)
    graph.add_conditional_edges(MODEL_NODE, route_after_model, [TOOLS_NODE, END])
    graph.add_edge(TOOLS_NODE, MODEL_NODE)
    compiled = graph.compile(checkpointer=checkpointer, name=spec.name)
    # Two steps per round, and the final answer: the tool-round limit ends first.
    return compiled.with_config(recursion_limit=2 * spec.limits.max_iterations + 5)


def identified(message: Message) -> Message:
    """`message`, with an id if it had none: given as the node returns it, kept by its saved write.

    LangGraph's reducer would give it one each time the write is applied, and a
    resumed turn applies a saved write again: the archive would take it for a
    new message. (Streaming messages stamps them too; a run without it must.)
    """
    if message.id is None:
        message.id = str(uuid.uuid4())
    return message


def _rejections(rejected: dict[str, Rejection], state: AgentState) -> StateUpdate:
    """The update of `rejected_calls`: none when it stays empty (a checkpoint write less)."""
    return {"rejected_calls": rejected} if rejected or state.get("rejected_calls") else {}
