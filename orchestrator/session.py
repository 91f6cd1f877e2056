"""One conversation: runs the agent graph turn by turn and streams what happens."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from orchestrator.errors import OrchestratorError
from orchestrator.events import StatusEvent, ToolEvent
from orchestrator.graph.builder import MODEL_NODE
from orchestrator.llm.providers import explain_model_error
from orchestrator.settings import Settings


class TokenEvent(TypedDict):
    """A piece of the model's reply as it is generated."""

    kind: Literal["token"]
    text: str
    message_id: str | None


TurnEvent = StatusEvent | ToolEvent | TokenEvent
EventHandler = Callable[[TurnEvent], None]


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call the model made during a turn, and how it ended."""

    name: str
    arguments: dict[str, object]
    status: str
    request_id: str | None = None


@dataclass(frozen=True)
class TurnResult:
    """What one user message led to."""

    answer: str
    answer_id: str | None
    iterations: int
    tool_calls: list[ToolCallRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The shape `orchestrator ask --json` prints."""
        return {
            "answer": self.answer,
            "iterations": self.iterations,
            "tool_calls": [
                {
                    "name": c.name,
                    "arguments": c.arguments,
                    "status": c.status,
                    "request_id": c.request_id,
                }
                for c in self.tool_calls
            ],
        }


class Session:
    """A conversation of one user, remembered by the graph's checkpointer under `session_id`."""

    def __init__(
        self,
        *,
        graph: CompiledStateGraph,
        settings: Settings,
        user_id: str,
        session_id: str | None = None,
    ) -> None:
        self.graph = graph
        self.settings = settings
        self.user_id = user_id
        self.session_id = session_id or uuid.uuid4().hex[:12]

    @property
    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.session_id, "user_id": self.user_id}}

    async def run(self, text: str, *, on_event: EventHandler | None = None) -> TurnResult:
        """Send one user message and run the graph until the model answers."""
        message = HumanMessage(content=text, id=uuid.uuid4().hex)
        turn_input = {"messages": [message], "iterations": 0}
        try:
            async for namespace, mode, chunk in self.graph.astream(
                turn_input, self.config, stream_mode=["custom", "messages"], subgraphs=True
            ):
                event = _to_event(namespace, mode, chunk)
                if event is not None and on_event is not None:
                    on_event(event)
        except OrchestratorError:
            raise
        except Exception as error:
            explained = explain_model_error(error, settings=self.settings)
            if explained is None:
                raise
            raise explained from error
        return _collect_turn(await self.history(), after=message.id)

    async def history(self) -> list[BaseMessage]:
        """Every message of the conversation so far."""
        state = await self.graph.aget_state(self.config)
        return list(state.values.get("messages", []))


def _to_event(namespace: tuple[str, ...], mode: str, chunk: object) -> TurnEvent | None:
    # Sub-agents run as subgraphs (a non-empty namespace): their tool progress is
    # shown one level deeper per graph, while their stages and replies are theirs.
    if mode == "custom":
        event: StatusEvent | ToolEvent = chunk  # type: ignore[assignment]  # only our nodes write it
        if event["kind"] == "tool":
            return {**event, "depth": len(namespace)}
        return None if namespace else event
    message, metadata = chunk  # type: ignore[misc]
    is_reply = isinstance(message, AIMessageChunk | AIMessage)
    if namespace or not is_reply or metadata.get("langgraph_node") != MODEL_NODE:
        return None
    return TokenEvent(kind="token", text=message.text, message_id=message.id) if message.text else None


def _collect_turn(messages: list[BaseMessage], *, after: str | None) -> TurnResult:
    start = next(i for i, m in enumerate(messages) if m.id == after) + 1
    turn = messages[start:]
    replies = [m for m in turn if isinstance(m, AIMessage)]
    outcomes = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    calls = [
        _record(call["name"], call["args"], outcomes.get(call["id"] or ""))
        for reply in replies
        for call in reply.tool_calls
    ]
    final = replies[-1] if replies else None
    return TurnResult(
        answer=final.text if final else "",
        answer_id=final.id if final else None,
        iterations=len(replies),
        tool_calls=calls,
    )


def _record(name: str, args: dict[str, object], outcome: ToolMessage | None) -> ToolCallRecord:
    if outcome is None:
        return ToolCallRecord(name=name, arguments=args, status="not_run")
    artifact = outcome.artifact if isinstance(outcome.artifact, dict) else {}
    return ToolCallRecord(
        name=name,
        arguments=args,
        status=str(artifact.get("status", outcome.status)),
        request_id=artifact.get("request_id"),
    )
