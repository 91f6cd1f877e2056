"""What a turn reads of the graph's stream: the modes its watchers need, each part as a turn event."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.types import StreamMode, StreamPart

from orchestrator.conversation.turns import EventHandler, PartHandler, TokenEvent, TurnEvent
from orchestrator.events import PlanEvent, Stage, StatusEvent, ToolEvent
from orchestrator.graph.builder import MODEL_NODE


def stream_modes(*, on_event: EventHandler | None, on_part: PartHandler | None) -> list[StreamMode]:
    """What a turn asks of the graph's stream: as much as its watchers show."""
    if on_part is not None:
        return ["custom", "messages", "updates", "values"]
    # Without a handler nothing shows tokens or progress: only states are read.
    return ["custom", "messages", "values"] if on_event is not None else ["values"]


def turn_event(part: StreamPart) -> TurnEvent | None:
    """The turn event a part of the graph's stream shows the person, if any."""
    # Sub-agents run as subgraphs (a non-empty namespace): their tool progress is
    # shown one level deeper per graph, and their compactions (which name them);
    # their other stages and replies are theirs.
    namespace = part["ns"]
    if part["type"] == "custom":
        event: StatusEvent | ToolEvent | PlanEvent = part["data"]  # only our nodes write it
        if event["kind"] == "status":
            return None if namespace and event["stage"] != Stage.COMPACTED else event
        shown = event.copy()
        shown["depth"] = len(namespace)
        return shown
    if part["type"] != "messages":  # the values mode's are read by the caller
        return None
    message, metadata = part["data"]
    is_reply = isinstance(message, AIMessageChunk | AIMessage)
    if namespace or not is_reply or metadata.get("langgraph_node") != MODEL_NODE:
        return None
    return TokenEvent(kind="token", text=message.text, message_id=message.id) if message.text else None
