"""Notes the orchestrator adds to a conversation for the model (a background job's result),
told apart from what the person wrote; and where a turn begins (with either).

Below the graph and the store, which read them too; the conversation's own
modules are in `orchestrator.conversation`.

A note goes to the model in the user's role, marked as the orchestrator's own:
many local chat templates refuse a system message anywhere but first, so a
system message in the middle of a conversation would fail the whole turn. The
mark (kept in `additional_kwargs`, which no provider is sent) tells it apart
from what the person wrote: it is not embedded as their words, not used as
their question for memory search, and shown as a note in the history.
"""

from __future__ import annotations

import uuid

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

NOTE_KEY = "orchestrator_note"
FROM_ORCHESTRATOR = "(A note from the orchestrator, not from the user.) "


def note(text: str, *, kind: str) -> HumanMessage:
    """A note of `kind` (`background_task`, ...) for the model, in the user's role."""
    return HumanMessage(
        content=FROM_ORCHESTRATOR + text, id=uuid.uuid4().hex, additional_kwargs={NOTE_KEY: kind}
    )


def is_note(message: BaseMessage) -> bool:
    """Whether `message` is the orchestrator's note (a system message in older conversations)."""
    if isinstance(message, SystemMessage):
        return True
    return isinstance(message, HumanMessage) and NOTE_KEY in message.additional_kwargs


def is_persons(message: BaseMessage) -> bool:
    """Whether `message` is what the person wrote."""
    return isinstance(message, HumanMessage) and not is_note(message)


def turn_start(messages: list[BaseMessage]) -> str | None:
    """The id of the message the last turn began with: the user's, or a follow-up notice."""
    starts = (m.id for m in reversed(messages) if isinstance(m, HumanMessage | SystemMessage))
    return next(starts, None)
