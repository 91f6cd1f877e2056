"""A run's graph stream as the LangGraph Agent Server streams it, by the client's `stream_mode`.

- `values`: the state after each step (`__interrupt__` beside it while questions wait);
- `updates`: what each node returned;
- `messages-tuple`: `[message chunk, metadata]` for the model's tokens;
- `messages`: each reply so far (`messages/metadata`, `messages/partial`, `messages/complete`);
- `custom`: the orchestrator's own turn events (tool progress, status, plans), as `chat` shows;
- `events`: the model's tokens as `on_chat_model_stream` and each node's output as
  `on_chain_stream` (a subset of LangChain's event stream).

Only the top-level graph's parts: a sub-agent's show as the tool progress `custom` carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, cast, get_args

from langchain_core.messages import AIMessageChunk, BaseMessage, BaseMessageChunk
from langgraph.types import Interrupt, StreamPart

from orchestrator.api.wire import interrupts_of

Mode = Literal["values", "updates", "messages", "messages-tuple", "custom", "events"]
MODES: frozenset[str] = frozenset(get_args(Mode))
# An event's data as the graph gave it (messages, interrupts...): written as JSON when sent,
# never before, so that what no client reads (a waited-for run's states) costs nothing.
Event = tuple[str, object]


class EventStream:
    """Turns each part of a run's graph stream into the events its client asked for."""

    def __init__(self, modes: Iterable[Mode], *, run_id: str) -> None:
        self.modes = frozenset(modes)
        self.run_id = run_id
        self._replies: dict[str, BaseMessageChunk] = {}  # `messages` mode: each reply so far

    def events(self, part: StreamPart) -> list[Event]:
        """The events one part makes (none when no asked mode shows it)."""
        if part["type"] == "values":
            return self._values(part["data"], part["interrupts"]) if "values" in self.modes else []
        if part["type"] == "updates":
            return self._updates(part["data"])
        if part["type"] == "messages":
            message, metadata = part["data"]
            return self._tokens(cast(BaseMessage, message), metadata)
        if part["type"] == "custom" and "custom" in self.modes:
            return [("custom", part["data"])]
        return []

    def _values(self, state: object, interrupts: Sequence[Interrupt]) -> list[Event]:
        values = dict(cast(dict[str, object], state))  # a state: a mapping
        if interrupts:
            values["__interrupt__"] = interrupts_of(interrupts)
        return [("values", values)]

    def _updates(self, data: object) -> list[Event]:
        events: list[Event] = []
        if "updates" in self.modes:
            events.append(("updates", data))
        if "events" in self.modes and isinstance(data, dict):
            for node, update in data.items():  # pyright: ignore[reportUnknownVariableType]  # a node's update
                chunk = {"event": "on_chain_stream", "name": str(node), "run_id": self.run_id}  # pyright: ignore[reportUnknownArgumentType]  # a node's name, shown as text
                events.append(("events", {**chunk, "data": {"chunk": update}}))
        if "messages" in self.modes and isinstance(data, dict):
            events += self._completed(data)  # pyright: ignore[reportUnknownArgumentType]  # node -> update
        return events

    def _tokens(self, message: BaseMessage, metadata: object) -> list[Event]:
        events: list[Event] = []
        if "messages-tuple" in self.modes:
            events.append(("messages", [message, metadata]))
        if "events" in self.modes:
            data = {"chunk": message}
            events.append(("events", {"event": "on_chat_model_stream", "run_id": self.run_id, "data": data, "metadata": metadata}))
        if "messages" in self.modes and message.id:
            events += self._reply(message, metadata, message.id)
        return events

    def _reply(self, message: BaseMessage, metadata: object, message_id: str) -> list[Event]:
        """`messages` mode: a reply so far, or whole (a model that does not stream sends it so)."""
        so_far = self._replies.get(message_id)
        events: list[Event] = []
        if so_far is None:
            events.append(("messages/metadata", {message_id: {"metadata": metadata}}))
        if not isinstance(message, BaseMessageChunk):
            self._replies.pop(message_id, None)
            return [*events, ("messages/complete", [message])]
        self._replies[message_id] = so_far = message if so_far is None else so_far + message
        return [*events, ("messages/partial", [so_far])]

    def _completed(self, update: dict[object, object]) -> list[Event]:
        """`messages/complete` for each streamed reply a node's update holds whole."""
        done: list[Event] = []
        for value in update.values():
            for message in _messages_in(value):
                if message.id is not None and self._replies.pop(message.id, None) is not None:
                    done.append(("messages/complete", [message]))
        return done


def _messages_in(update: object) -> list[BaseMessage]:
    if not isinstance(update, dict):
        return []
    messages = update.get("messages")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]  # a node's update
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, BaseMessage) and not isinstance(m, AIMessageChunk)]  # pyright: ignore[reportUnknownVariableType]  # a node's update: any list
