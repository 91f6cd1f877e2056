"""Builds an agent graph: model node -> router -> tools node -> model node ...

The same builder serves the orchestrator and every nested agent: each level
gets its own model, tools and limits.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Protocol, TypedDict, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from orchestrator.dispatch.background import is_acknowledgement
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.errors import IncompleteReplyError
from orchestrator.events import BACKGROUND, Stage, ToolPhase, emit_status, emit_tool
from orchestrator.graph.calls import SAFE_ID, Rejection, check_calls, refusal
from orchestrator.graph.history import valid_history
from orchestrator.graph.model_usage import count_model_call, least_cost
from orchestrator.graph.prompts import (
    ITERATION_LIMIT,
    NO_CHOICES,
    ORCHESTRATOR_PROMPT,
    REPLY_CUT_OFF,
)
from orchestrator.graph.state import AgentState, model_calls_this_turn
from orchestrator.levels import Limits
from orchestrator.llm.providers import reports_finish_reason
from orchestrator.llm.reply import Reply, ReplyLimits, read_reply
from orchestrator.llm.text_calls import with_text_calls
from orchestrator.notes import is_persons
from orchestrator.store.text import storable_text
from orchestrator.tools.context import RunContext
from orchestrator.usage.prices import ModelIdentity

MODEL_NODE = "model"
TOOLS_NODE = "tools"
# The detail of a COMPLETE whose answer is a stop's notice, not the reply the model streamed.
STOPPED = "stopped"

logger = logging.getLogger(__name__)
Message = TypeVar("Message", bound=BaseMessage)

StateUpdate = dict[str, object]


class Retriever(Protocol):
    """Context for a query from the user's other conversations ('' when none)."""

    async def __call__(self, query: str, *, user_id: str, session_id: str) -> str: ...


class ModelNode:
    """Calls the model on the conversation and checks its reply; limits tool rounds per turn.

    Each call is counted on the run's usage meter; when a budget stops the
    turn, the model is not called and the stop is the answer. With
    `text_tool_calls`, calls a model wrote as text are read as calls.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        tools: Sequence[BaseTool],
        system_prompt: str,
        max_iterations: int,
        limits: ReplyLimits | None = None,
        text_tool_calls: bool = True,
        retriever: Retriever | None = None,
    ) -> None:
        self.model: Runnable = model.bind_tools(tools) if tools else model
        self.text_tool_calls = text_tool_calls
        self.tool_names = frozenset(tool.name for tool in tools)
        self.system_prompt = SystemMessage(system_prompt)
        self.max_iterations = max_iterations
        self.limits = limits or ReplyLimits()
        self.reports_finish = reports_finish_reason(model)
        self.identity = ModelIdentity.of(model)
        self.retriever = retriever

    async def __call__(
        self, state: AgentState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        iterations = model_calls_this_turn(state["messages"])
        emit_status(Stage.SUBMITTED if iterations == 0 else Stage.PROCESSING)
        run = run_context(runtime, config)
        found = await self._look_up(state, run) if iterations == 0 else state.get("context")
        context = [SystemMessage(found)] if found else []
        history = valid_history(state["messages"], tool_names=self.tool_names)
        messages = [self.system_prompt, *context, *history]
        stop = run.usage.before_model(least_cost(run, self.identity, messages)) if run.usage else None
        if stop is not None:  # a budget ends the turn: its stop is the answer
            emit_status(Stage.COMPLETE, STOPPED)
            answer = AIMessage(stop.message)
            return {"messages": [identified(answer)], **_rejections({}, state)}
        update: StateUpdate = {"context": found} if iterations == 0 and self.retriever else {}
        emit_status(Stage.STREAMING)
        try:
            started = time.monotonic()
            reply = await read_reply(self.model, messages, config, limits=self.limits)
            seconds = time.monotonic() - started
            await count_model_call(
                run, self.identity, reply.message, sent=messages, seconds=seconds
            )
            response, rejected = self._checked(reply)
        except Exception as error:
            emit_status(Stage.ERROR, type(error).__name__)
            raise
        # Every model call before this one in the turn asked for tools: one round each.
        stopped = bool(response.tool_calls) and iterations >= self.max_iterations
        if stopped:
            response, rejected = _stop_at_limit(response, self.max_iterations), {}
        if response.tool_calls:
            emit_status(Stage.EXECUTING, f"{len(response.tool_calls)} tool call(s)")
        else:
            emit_status(Stage.COMPLETE, STOPPED if stopped else "")
        return {
            **update,
            **_rejections(rejected, state),
            "messages": [identified(response)],
        }

    async def _look_up(self, state: AgentState, run: RunContext) -> str:
        """Context for the turn's message from the user's other sessions ('' when none).

        The session starts the lookup with the turn (`RunContext.lookup`), so
        that it runs beside the checkpoint work before this node; without one
        it runs here. Missing context never costs the user an answer.
        """
        if self.retriever is None:
            return ""
        try:
            if run.lookup is not None:
                return await run.lookup
            query = next(
                (m.text for m in reversed(state["messages"]) if is_persons(m)), ""
            )
            return await self.retriever(
                storable_text(query),  # PostgreSQL takes no NUL, not even in a query
                user_id=run.user_id,
                session_id=run.session_id or "",
            )
        except Exception as error:
            logger.warning("RAG lookup failed: %s: %s", type(error).__name__, error)
            return ""

    def _checked(self, reply: Reply) -> tuple[AIMessage, dict[str, Rejection]]:
        """The reply with its calls checked; an unfinished reply without calls is an error."""
        unsaid = self.reports_finish and reply.finish_reason is None
        cut = unsaid or reply.finish_reason == "length"
        if unsaid and not reply.calls:
            text = reply.message.text
            raise IncompleteReplyError(
                REPLY_CUT_OFF.format(length=len(text)) if text else NO_CHOICES
            )
        if self.text_tool_calls:
            reply = with_text_calls(reply, tool_names=self.tool_names)
        checked = check_calls(reply, tool_names=self.tool_names, limits=self.limits, cut=cut)
        message_id = reply.message.id
        if message_id is not None and not SAFE_ID.fullmatch(message_id):
            message_id = None  # the archive indexes it: the graph gives it a new one
        message = reply.message.model_copy(update={"tool_calls": checked.calls, "id": message_id})
        return message, checked.rejected


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
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    limits: Limits,
    system_prompt: str = ORCHESTRATOR_PROMPT,
    checkpointer: BaseCheckpointSaver | None = None,
    retriever: Retriever | None = None,
    middleware: Sequence[ToolMiddleware] | None = None,
    reply_limits: ReplyLimits | None = None,
    text_tool_calls: bool = True,
    name: str = "orchestrator",
) -> CompiledStateGraph:
    """Compile an agent graph over `model` and `tools`, with RAG context when given a retriever.

    Tool calls run through `middleware` (the default pipeline when None).
    `reply_limits` bound the tool names and arguments a model reply may stream;
    `text_tool_calls` reads calls a model wrote as text (ORCHESTRATOR_TEXT_TOOL_CALLS).
    """
    graph = StateGraph(AgentState, context_schema=RunContext)
    graph.add_node(
        MODEL_NODE,
        ModelNode(
            model,
            tools=tools,
            system_prompt=system_prompt,
            max_iterations=limits.max_iterations,
            limits=reply_limits,
            text_tool_calls=text_tool_calls,
            retriever=retriever,
        ),
    )
    dispatcher = Dispatcher(tools, limits=limits, middleware=middleware)
    graph.add_node(TOOLS_NODE, ToolTaskNode(dispatcher), input_schema=AgentState)  # type: ignore[arg-type]
    graph.add_edge(START, MODEL_NODE)
    graph.add_conditional_edges(MODEL_NODE, route_after_model, [TOOLS_NODE, END])
    graph.add_edge(TOOLS_NODE, MODEL_NODE)
    compiled = graph.compile(checkpointer=checkpointer, name=name)
    # Two steps per round, and the final answer: the tool-round limit ends first.
    return compiled.with_config(recursion_limit=2 * limits.max_iterations + 5)


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


def _stop_at_limit(response: AIMessage, limit: int) -> AIMessage:
    notice = ITERATION_LIMIT.format(limit=limit)
    text = response.text.strip()
    # A new message without the tool calls keeps the history valid for every provider.
    return AIMessage(content=f"{text}\n\n{notice}" if text else notice)
