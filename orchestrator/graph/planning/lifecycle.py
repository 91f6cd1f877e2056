"""A plan's life in the graph's state: made, revised, its tasks' outcomes, its end.

The state keeps one plan (the latest); its channel's reducer is `merge_plan`:
a whole plan replaces it, and each task's outcome, written by the task's own
LangGraph task (several at once), is applied to that task alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage

from orchestrator.dispatch.ask_approval import EDITED_NOTE
from orchestrator.dispatch.json_shape import is_array, is_object
from orchestrator.plans import Plan, PlanStatus, PlanTask, TaskOutcome
from orchestrator.tools.results import ToolResult

# How the approval pipeline's note on an edited call begins.
CHANGED_BY_THE_USER = EDITED_NOTE.partition("{")[0]
EDITED_PLAN = "The user changed your plan before it ran: the tasks below are theirs."


def merge_plan(current: Plan | None, update: Plan | TaskOutcome | None) -> Plan | None:
    """The plan channel's reducer: a plan replaces the one kept; an outcome changes its task."""
    if update is None or "goal" in update:
        return update  # a whole plan (or none)
    if not current:
        return current  # an outcome of no plan kept: nothing to change
    outcome = update
    tasks = [_with(task, outcome) if task["id"] == outcome["task"] else task for task in current["tasks"]]
    return {**current, "tasks": tasks}


def _with(task: PlanTask, outcome: TaskOutcome) -> PlanTask:
    return {
        **task,
        "status": outcome["status"],
        "request_id": outcome["request_id"],
        "result": outcome["result"],
    }


def made_plan(
    result: ToolResult,
    *,
    call_id: str,
    revising: Plan | None,
    turn: str | None,
    under: str | None,
) -> Plan | None:
    """The plan an accepted `create_execution_plan` call made (None: `result` holds none).

    A re-plan keeps the finished tasks of the plan it `revising`, and its other
    tasks go to `replaced`.
    """
    data = result.data
    if not is_object(data):
        return None
    given = data.get("tasks")
    if not is_array(given):
        return None
    new = [_pending(task) for task in given if is_object(task)]
    request_id = result.request_id or call_id
    kept = [task for task in revising["tasks"] if task["status"] == "done"] if revising else []
    return Plan(
        id=revising["id"] if revising else request_id,
        goal=str(data.get("goal", "")),
        tasks=[*kept, *new],
        status="running",
        replans=revising["replans"] + 1 if revising else 0,
        replaced=[
            *(revising["replaced"] if revising else []),
            *(task for task in (revising["tasks"] if revising else []) if task["status"] != "done"),
        ],
        request_id=request_id,
        call_id=call_id,
        turn=turn,
        under=under,
        note=_changed(result.message),
    )


def _pending(task: dict[str, object]) -> PlanTask:
    arguments = task.get("arguments")
    depends_on = task.get("depends_on")
    return PlanTask(
        id=str(task["id"]),
        description=str(task.get("description", "")),
        tool=str(task["tool"]),
        arguments=dict(arguments) if is_object(arguments) else {},
        depends_on=[str(other) for other in depends_on] if is_array(depends_on) else [],
        status="pending",
        request_id=None,
        result=None,
    )


def _changed(message: str) -> str:
    """What the model must hear of the person's edit of the plan ("" when there was none)."""
    return EDITED_PLAN if message.startswith(CHANGED_BY_THE_USER) else ""


def revisable(plan: Plan | None, *, turn: str | None) -> Plan | None:
    """The plan a plan call of this turn revises: one that failed in this turn (else None)."""
    if plan and plan["status"] == "failed" and plan["turn"] == turn:
        return plan
    return None


def ready(plan: Plan) -> list[PlanTask]:
    """The pending tasks whose dependencies are all done: they run now."""
    done = {task["id"] for task in plan["tasks"] if task["status"] == "done"}
    return [
        task
        for task in plan["tasks"]
        if task["status"] == "pending" and all(other in done for other in task["depends_on"])
    ]


def running(plan: Plan | None, messages: Sequence[BaseMessage]) -> Plan | None:
    """The plan still to be run for the last model message's plan call, if there is one."""
    if not plan or plan["status"] != "running":
        return None
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    asked = last is not None and any(call["id"] == plan["call_id"] for call in last.tool_calls)
    return plan if asked else None


def ended(plan: Plan, status: PlanStatus) -> Plan:
    """`plan` ended with `status`: its tasks that never ran are skipped.

    Cancelled (the turn was), the tasks that were running did not finish: failed.
    """
    sent: set[str] = {task["id"] for task in ready(plan)} if status == "cancelled" else set()
    tasks = [
        _never_ran(task, failed=task["id"] in sent) if task["status"] == "pending" else task
        for task in plan["tasks"]
    ]
    return {**plan, "status": status, "tasks": tasks}


def _never_ran(task: PlanTask, *, failed: bool) -> PlanTask:
    return {**task, "status": "failed" if failed else "skipped"}
