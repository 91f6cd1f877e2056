"""A plan of tool calls: as the graph keeps it, and as people and `ask --json` see it.

The model lays out work with the built-in `create_execution_plan` tool; the
agent graph runs its tasks (see `graph.planning`) and keeps the plan in its
checkpointed state. This module holds the plan's shape alone, so that every
layer that shows or reports a plan (the session, `ask --json`, the terminal,
an agent reporting to the level above it) reads the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypedDict, TypeGuard

PLAN_TOOL = "create_execution_plan"

# A task's status as kept; `running` is only ever shown (see `shown_status`): a task
# is sent to run once its dependencies are done, and its end is what is written.
TaskStatus = Literal["pending", "running", "done", "failed", "skipped"]
# running: tasks are run; done: every task is done; failed: a task failed (the model may
# re-plan); stopped: it failed past the re-plan limit; cancelled: the turn was cancelled.
PlanStatus = Literal["running", "done", "failed", "stopped", "cancelled"]
ENDED_TASK: tuple[TaskStatus, ...] = ("done", "failed", "skipped")


class PlanTask(TypedDict):
    """One task: a call of `tool` with `arguments` once the tasks of `depends_on` are done.

    `arguments` are as the plan gave them, references (`{{t1.data.x}}`)
    included; `result` is the call's result envelope as JSON once it ended.
    """

    id: str
    description: str
    tool: str
    arguments: dict[str, object]
    depends_on: list[str]
    status: TaskStatus
    request_id: str | None
    result: dict[str, object] | None


class Plan(TypedDict):
    """A plan in the graph's state: its tasks, how far they got, where it stands.

    `request_id` is the plan call's (the parent of the tasks' requests),
    `call_id` the model's call it answers; both are the latest revision's.
    `replaced` are tasks of earlier revisions a re-plan did not keep; `turn`
    the id of the message the turn began with; `under` the request the
    planning graph runs for (a nested agent's call; None at the top).
    """

    id: str
    goal: str
    tasks: list[PlanTask]
    status: PlanStatus
    replans: int
    replaced: list[PlanTask]
    request_id: str
    call_id: str
    turn: str | None
    under: str | None
    note: str


class TaskOutcome(TypedDict):
    """How one task ended, as its own LangGraph task writes it to the plan."""

    task: str
    status: TaskStatus
    request_id: str | None
    result: dict[str, object] | None


class TaskView(TypedDict):
    """A task as shown and reported: `plan` is the plan of the agent it called, if it made one."""

    id: str
    description: str
    tool: str
    status: TaskStatus
    request_id: str | None
    plan: NotRequired[PlanView]


class PlanView(TypedDict):
    """A plan as `ask --json`, `/plan` and the live checklist show it."""

    id: str
    goal: str
    status: PlanStatus
    replans: int
    tasks: list[TaskView]
    replaced: list[TaskView]


# Where an agent's result carries the plan it made (its metadata: the model above
# does not read it, the person's views do).
PLAN_METADATA = "plan"


def plan_view(plan: Plan) -> PlanView:
    """What people and `ask --json` see of `plan`."""
    done = {task["id"] for task in plan["tasks"] if task["status"] == "done"}
    return PlanView(
        id=plan["id"],
        goal=plan["goal"],
        status=plan["status"],
        replans=plan["replans"],
        tasks=[task_view(task, status=shown_status(task, plan, done=done)) for task in plan["tasks"]],
        replaced=[task_view(task, status=task["status"]) for task in plan["replaced"]],
    )


def task_view(task: PlanTask, *, status: TaskStatus) -> TaskView:
    """One task as shown, with the plan of the agent it called when its result carries one."""
    view = TaskView(
        id=task["id"],
        description=task["description"],
        tool=task["tool"],
        status=status,
        request_id=task["request_id"],
    )
    nested = nested_plan(task["result"])
    if nested is not None:
        view["plan"] = nested
    return view


def shown_status(task: PlanTask, plan: Plan, *, done: set[str]) -> TaskStatus:
    """A pending task of a running plan whose dependencies are done was sent to run: running."""
    if task["status"] != "pending" or plan["status"] != "running":
        return task["status"]
    return "running" if all(dependency in done for dependency in task["depends_on"]) else "pending"


def nested_plan(result: Mapping[str, object] | None) -> PlanView | None:
    """The plan an agent's result says it made (see `PLAN_METADATA`), if any."""
    metadata = (result or {}).get("metadata")
    found = metadata.get(PLAN_METADATA) if isinstance(metadata, Mapping) else None
    return found if _is_plan_view(found) else None


def _is_plan_view(value: object) -> TypeGuard[PlanView]:
    # The metadata comes back from JSON (a job's result, a checkpoint): a dict with tasks.
    return isinstance(value, dict) and "tasks" in value
