"""A plan as a checklist: a line per task with its status, the plans of agents under their task.

`PlanBoard` follows a turn's plan events (a plan made, revised or ended; one
task's change) and says what to show; `checklist` writes one plan's lines as
rich markup, every text from the model escaped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from orchestrator.events import PlanEvent
from orchestrator.plans import PlanView, TaskView
from orchestrator.terminal.text import one_line, shown

MARKS = {
    "pending": "[dim]○[/dim]",
    "running": "[cyan]◐[/cyan]",
    "done": "[green]✓[/green]",
    "failed": "[red]✗[/red]",
    "skipped": "[dim]–[/dim]",
    "re-planned": "[yellow]↻[/yellow]",
}
ENDINGS = {
    "running": "",
    "done": " · done",
    "failed": " · a task failed: the model may re-plan",
    "stopped": " · stopped at the re-plan limit",
    "cancelled": " · cancelled",
}
DESCRIPTION_CHARS = 80


def checklist(
    view: PlanView,
    *,
    indent: int = 0,
    nested: Mapping[str, PlanView] | None = None,
    shown_above: frozenset[str] = frozenset(),
) -> list[str]:
    """The lines of `view`: its goal, then each task (and the plan of the agent it called).

    `nested` are plans made below, by the request they run for: a task whose
    request is one of them shows it under itself (once: `shown_above` are the
    plans it is shown under).
    """
    above = shown_above | {view["id"]}
    pad = "  " * indent
    replans = f" · re-planned {view['replans']}x" if view["replans"] else ""
    lines = [
        f"{pad}[bold]plan[/bold]: {shown(one_line(view['goal'], DESCRIPTION_CHARS))}"
        f"[dim]{replans}{ENDINGS[view['status']]}[/dim]"
    ]
    for task in view["replaced"]:
        lines.append(_task_line(task, pad=pad, status="re-planned"))
    for task in view["tasks"]:
        lines.append(_task_line(task, pad=pad, status=task["status"]))
        below = task.get("plan") or (nested or {}).get(task["request_id"] or "")
        if below is not None and below["id"] not in above:
            lines.extend(checklist(below, indent=indent + 2, nested=nested, shown_above=above))
    return lines


def _task_line(task: TaskView, *, pad: str, status: str) -> str:
    description = shown(one_line(task["description"], DESCRIPTION_CHARS))
    return (
        f"{pad}  {MARKS[status]} {shown(task['id'])} {description} "
        f"[dim]· {shown(task['tool'])} · {status}[/dim]"
    )


class PlanBoard:
    """The plans of a turn as their events tell them: each plan by id, and the request it runs for."""

    def __init__(self) -> None:
        self.plans: dict[str, PlanView] = {}
        self.under: dict[str, str | None] = {}

    def apply(self, event: PlanEvent) -> PlanView | None:
        """Take in `event`; the plan it changed (None: a task of a plan not seen)."""
        plan_id = event["plan_id"]
        if event["plan"] is not None:
            self.plans[plan_id] = event["plan"]
            self.under[plan_id] = event["under"]
            return event["plan"]
        view = self.plans.get(plan_id)
        if view is None or event["task"] is None or event["status"] is None:
            return None
        status, request_id = event["status"], event["request_id"]
        tasks: list[TaskView] = [
            {**task, "status": status, "request_id": request_id} if task["id"] == event["task"] else task
            for task in view["tasks"]
        ]
        self.plans[plan_id] = {**view, "tasks": tasks}
        return self.plans[plan_id]

    def is_root(self, plan_id: str) -> bool:
        """Whether the plan runs for no task of another plan here (it is shown on its own)."""
        under = self.under.get(plan_id)
        return under is None or under not in set(self._task_requests(besides=plan_id))

    def lines(self) -> list[str]:
        """Every plan's checklist, a nested plan under the task whose agent made it."""
        nested = self._nested()
        return [
            line
            for plan_id, view in self.plans.items()
            if self.is_root(plan_id)
            for line in checklist(view, nested=nested)
        ]

    def lines_of(self, plan_id: str) -> list[str]:
        """The checklist of one plan, with the plans under its tasks."""
        return checklist(self.plans[plan_id], nested=self._nested())

    def drop(self, plan_id: str) -> None:
        """Forget a plan and the plans under its tasks (shown for good)."""
        requests = {task["request_id"] for task in self.plans[plan_id]["tasks"]} - {None}
        for other in [p for p, under in self.under.items() if under in requests and p != plan_id]:
            self.drop(other)
        self.plans.pop(plan_id, None)
        self.under.pop(plan_id, None)

    def _nested(self) -> dict[str, PlanView]:
        return {under: self.plans[p] for p, under in self.under.items() if under is not None}

    def _task_requests(self, *, besides: str) -> Iterator[str | None]:
        for plan_id, view in self.plans.items():
            if plan_id != besides:
                yield from (task["request_id"] for task in view["tasks"])
