"""The state an agent graph carries from node to node."""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

from orchestrator.graph.calls import Rejection


class AgentState(TypedDict):
    """Conversation so far, how many model calls the current turn has made, and its context.

    The session sets `iterations` to 0 with each user message, so the limit
    applies per turn while `messages` accumulate across turns.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    iterations: int
    context: NotRequired[str]  # RAG context for this turn, shown to the model, not stored as a message
    # Calls of the last model message that must not run (by call id), answered with these errors.
    rejected_calls: NotRequired[dict[str, Rejection]]
