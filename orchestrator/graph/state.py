"""The state an agent graph carries from node to node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, NotRequired, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph.message import add_messages  # pyright: ignore[reportMissingTypeStubs]  # langgraph is a namespace package: its py.typed is not read

from orchestrator.graph.calls import Rejection
from orchestrator.graph.planning.lifecycle import merge_plan
from orchestrator.plans import Plan


class OrchestratorState(TypedDict):
    """Conversation so far, and the current turn's context.

    How many model calls the turn has made is read from `messages` (see
    `model_calls_this_turn`), not kept beside them: a channel for it cost every
    step a checkpoint write. Checkpoints of earlier versions hold an
    `iterations` channel, which LangGraph ignores.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    context: NotRequired[str]  # RAG context for this turn, shown to the model, not stored as a message
    # Calls of the last model message that must not run (by call id), answered with these errors.
    rejected_calls: NotRequired[dict[str, Rejection]]
    # What the model sees in place of the messages up to and including `summary["upto"]`
    # (an id); the messages themselves stay (see `model_pipeline.compaction`).
    summary: NotRequired[Summary]
    # Whether the person was told that the system prompt and tool schemas crowd the model's
    # window (see `model_pipeline.window_notice`): once a session, even across processes.
    window_noted: NotRequired[bool]
    # The turn's plan, once the model made one (see `graph.planning`): kept after it ended,
    # as the session's last plan. `Plan | None`, not `Plan`: LangGraph would start an
    # aggregate channel of a TypedDict as an empty one, in every thread's state.
    plan: NotRequired[Annotated[Plan | None, merge_plan]]


class Summary(TypedDict):
    """The older part of a conversation, summarised: its text and the id of its last message.

    `turn` is the id of the message that began the turn that wrote it, `saved`
    the tokens it saved then, `failed` whether its summary call failed (the
    older messages were only cut): what `ask --json` reports as `compacted`.
    """

    text: str
    upto: str
    turn: NotRequired[str]
    saved: NotRequired[int]
    failed: NotRequired[bool]


def model_calls_this_turn(messages: Sequence[BaseMessage]) -> int:
    """The model's messages since the turn began (with the user's message or a follow-up notice)."""
    calls = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage | SystemMessage):
            break
        calls += isinstance(message, AIMessage)
    return calls
