"""Progress events a run writes to LangGraph's `custom` stream.

Nodes call `emit_status` / `emit_tool`; the session forwards the events to the
CLI, which shows them live. Outside a graph run (a tool called directly) the
events are dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal, NotRequired, TypedDict

from langgraph.config import get_stream_writer

from orchestrator.plans import PlanView, TaskStatus


class Stage(StrEnum):
    """Where a turn is."""

    SUBMITTED = "submitted"  # the user's message was accepted
    STREAMING = "streaming"  # the model is producing a reply
    EXECUTING = "executing"  # tool calls are running
    PROCESSING = "processing"  # tool results are going back to the model
    COMPLETE = "complete"  # the model answered
    ERROR = "error"  # the turn failed
    # A note on the model's window: older messages were summarised (or cut) to fit it, or the
    # system prompt and tool schemas alone take most of it.
    COMPACTED = "compacted"


class ToolPhase(StrEnum):
    """Where one tool call is."""

    STARTING = "starting"
    VALIDATING = "validating"
    EXECUTING = "executing"
    COMPLETED = "completed"


# The status of a call's `completed` event when the call goes on in the background.
BACKGROUND = "background"


class StatusEvent(TypedDict):
    """A change of stage of the whole turn, `at` when (ISO 8601, UTC).

    A model call's start (`submitted`, `processing`) also says which call of the
    turn it is (`round`, from 1) and how many messages the conversation holds
    (`messages`), as the seed's `ai-turn-start` event does.
    """

    kind: Literal["status"]
    stage: Stage
    detail: str
    at: str
    round: NotRequired[int]
    messages: NotRequired[int]


class ToolEvent(TypedDict):
    """Progress of one tool call; `index` is 1-based among `total` calls of the model turn.

    `depth` is 0 for the orchestrator's own tools, 1 for the tools of a sub-agent, ...
    """

    kind: Literal["tool"]
    phase: ToolPhase
    tool: str
    index: int
    total: int
    request_id: str
    parent_request_id: str | None
    status: str | None
    depth: int


class PlanEvent(TypedDict):
    """A plan made, revised or ended (`plan`: all of it), or one task's change (`task`, `status`).

    `plan_id` names the plan; `under` is the request its graph runs for (a
    nested agent's call, which is a task of the plan above when that one
    planned it; None at the top); `depth` as a tool event's.
    """

    kind: Literal["plan"]
    plan_id: str
    under: str | None
    plan: PlanView | None
    task: str | None
    status: TaskStatus | None
    request_id: str | None
    depth: int


Event = StatusEvent | ToolEvent | PlanEvent


def _write(event: Event) -> None:
    try:
        writer = get_stream_writer()
    except (KeyError, RuntimeError):  # not inside a graph run
        return
    writer(event)


def emit_status(
    stage: Stage,
    detail: str = "",
    *,
    round: int | None = None,  # noqa: A002  # the seed's word
    messages: int | None = None,
) -> None:
    """Report a stage of the current turn; a model call's start says which `round` of the turn
    it is and over how many `messages`."""
    event = StatusEvent(kind="status", stage=stage, detail=detail, at=_now())
    if round is not None and messages is not None:
        event["round"], event["messages"] = round, messages
    _write(event)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def emit_tool(
    phase: ToolPhase,
    *,
    tool: str,
    index: int,
    total: int,
    request_id: str,
    parent_request_id: str | None = None,
    status: str | None = None,
) -> None:
    """Report the progress of one tool call."""
    _write(
        ToolEvent(
            kind="tool",
            phase=phase,
            tool=tool,
            index=index,
            total=total,
            request_id=request_id,
            parent_request_id=parent_request_id,
            status=status,
            depth=0,  # the session knows how deep the graph that wrote it runs
        )
    )


def emit_plan(
    plan_id: str,
    *,
    under: str | None,
    plan: PlanView | None = None,
    task: str | None = None,
    status: TaskStatus | None = None,
    request_id: str | None = None,
) -> None:
    """Report a plan (all of it) or one of its tasks' change of status."""
    _write(
        PlanEvent(
            kind="plan",
            plan_id=plan_id,
            under=under,
            plan=plan,
            task=task,
            status=status,
            request_id=request_id,
            depth=0,  # as a tool event's: the session knows the depth
        )
    )
