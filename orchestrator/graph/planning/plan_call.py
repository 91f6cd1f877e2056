"""A `create_execution_plan` call in the tools node: checked against the plan it revises,
and, once accepted, the plan the graph runs instead of an answer to the model.

The call's answer comes when the plan's run ends (see `executor`); a call that
failed (an invalid plan, the person's rejection) is answered at once, as any.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolCall

from orchestrator.dispatch.middleware import CallRequest
from orchestrator.events import emit_plan
from orchestrator.graph.calls import Rejection
from orchestrator.graph.planning.lifecycle import made_plan, revisable
from orchestrator.graph.planning.plan_tool import PlanTool
from orchestrator.notes import turn_start
from orchestrator.plans import PLAN_TOOL, Plan, plan_view
from orchestrator.tools.results import ToolResult

ONE_AT_A_TIME = (
    "Only one create_execution_plan call runs at a time: this one was not run. Put every "
    "task into one plan."
)


def revised_request(request: CallRequest, revising: Plan | None) -> CallRequest:
    """A re-plan's call, checked against the plan it revises (whose done tasks it keeps)."""
    if revising is None or not isinstance(request.tool, PlanTool):
        return request
    kept = [task for task in revising["tasks"] if task["status"] == "done"]
    return request.override(tool=request.tool.revising(kept))


def accepted_plan(
    result: ToolResult, *, call: ToolCall, revising: Plan | None, turn: str | None, under: str | None
) -> Plan | None:
    """The plan an accepted call made, announced on the stream (None: the call failed)."""
    if result.status != "success":
        return None
    plan = made_plan(result, call_id=call["id"] or "", revising=revising, turn=turn, under=under)
    if plan is not None:
        emit_plan(plan["id"], under=under, plan=plan_view(plan))
    return plan


def plan_turn(messages: Sequence[BaseMessage], plan: Plan | None) -> tuple[str | None, Plan | None]:
    """The turn a plan call is made in, and the plan it revises (a failed one of that turn)."""
    turn = turn_start(list(messages))
    return turn, revisable(plan, turn=turn)


def extra_plan_calls(message: AIMessage) -> dict[str, Rejection]:
    """The plan calls of `message` after its first, which do not run (by call id)."""
    plans = [call for call in message.tool_calls if call["name"] == PLAN_TOOL]
    return {
        call["id"] or "": Rejection(code="invalid_arguments", message=ONE_AT_A_TIME)
        for call in plans[1:]
    }
