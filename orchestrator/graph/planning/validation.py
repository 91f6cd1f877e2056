"""What makes a plan valid at a level, checked before anything of it runs.

Every task calls a tool of the level (not the plan tool), with arguments its
schema takes (the model's parameters only: those the configuration fixes stay
hidden and fixed); ids are unique; dependencies and references name tasks of
the plan; nothing depends on itself, even through others; and the plan has no
more tasks than the level allows. A re-plan's plan may depend on, and refer
to, the tasks it keeps.

Arguments holding a reference (`{{t1.data.x}}`) are checked once it is
resolved, when the task runs (the dispatch pipeline validates every call);
here the other arguments are. A tool described by a JSON schema (an MCP
server's) is checked here only when none of its arguments holds one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import ErrorDetails

from orchestrator.dispatch.ask_approval import unknown_parameters
from orchestrator.dispatch.json_check import json_problems_before
from orchestrator.dispatch.json_shape import call_schema, properties
from orchestrator.dispatch.scope_check import hidden_sent
from orchestrator.dispatch.validate import parameters_model, schema_words
from orchestrator.graph.planning.references import has_reference, referenced_tasks
from orchestrator.plans import PLAN_TOOL, PlanTask

ID_PATTERN = r"^[A-Za-z0-9_-]{1,40}$"
JSON_CHECK_SECONDS = 1.0  # a schema's patterns get this long per task, here
TOO_MANY = "{count} tasks, and a plan may have {limit} (ORCHESTRATOR_MAX_PLAN_TASKS): merge or drop some"
NOTHING_LEFT = "every task given is done already: list only the tasks still to do, or answer"
TWICE = "the id {id!r} is given to more than one task"
NOT_PLANNABLE = "task {id}: a plan's task cannot make a plan"
NO_TOOL = "task {id}: there is no tool named {tool!r} (the tools: {tools})"
NO_SUCH_TASK = "task {id} {how} {other!r}, which is no task of the plan"
ON_ITSELF = "task {id} depends on itself"
CYCLE = "tasks {ids} depend on each other in a cycle: nothing of it could ever run"
UNKNOWN = "{tool} does not take {names} (it takes {known})"
ARGUMENTS = "task {id}: {problems}"


class TaskSpec(BaseModel):
    """A call of one of your tools, once the tasks it depends on are done."""

    id: str = Field(pattern=ID_PATTERN, description="Short and unique: t1, t2, ...")
    description: str = Field(min_length=1, max_length=500, description="What it does, in a few words.")
    tool: str = Field(min_length=1, description="The name of one of your tools.")
    arguments: dict[str, object] = Field(
        default_factory=dict,
        description='The tool\'s arguments; "{{t1.data.x}}" is the value x in task t1\'s result.',
    )
    depends_on: list[str] = Field(
        default_factory=list, description="The ids of the tasks that must be done before it."
    )


class PlanArguments(BaseModel):
    """`create_execution_plan`'s arguments: what the plan is for, and its tasks.

    (The docstrings of these models are the model's to read: they are the schema's descriptions.)
    """

    goal: str = Field(min_length=1, max_length=1000, description="What the plan achieves.")
    tasks: list[TaskSpec] = Field(
        min_length=1, description="The tasks; independent ones run at once."
    )


@dataclass(frozen=True)
class PlanRules:
    """What a plan may hold at one level: its tools, how many tasks, the finished ones kept."""

    tools: Mapping[str, BaseTool]
    max_tasks: int
    kept: Sequence[PlanTask] = field(default_factory=tuple)

    def problems(self, tasks: Sequence[TaskSpec]) -> list[str]:
        """Everything wrong with `tasks`, one line each (none: the plan may run)."""
        kept = {task["id"] for task in self.kept}
        new = [task for task in tasks if task.id not in kept]  # a finished task stays as it is
        if not new:
            return [NOTHING_LEFT]
        found = self._count(len(kept) + len(new)) + _twice(new)
        known = kept | {task.id for task in new}
        for task in new:
            found += self._task(task, known=known)
        return found or _cycles(new, kept=kept)

    def _count(self, count: int) -> list[str]:
        return [TOO_MANY.format(count=count, limit=self.max_tasks)] if count > self.max_tasks else []

    def _task(self, task: TaskSpec, *, known: Collection[str]) -> list[str]:
        found = [
            NO_SUCH_TASK.format(id=task.id, how=how, other=other)
            for how, other in _links(task)
            if other not in known
        ]
        if task.id in task.depends_on:
            found.append(ON_ITSELF.format(id=task.id))
        if task.tool == PLAN_TOOL:
            return [*found, NOT_PLANNABLE.format(id=task.id)]
        tool = self.tools.get(task.tool)
        if tool is None:
            names = ", ".join(sorted(name for name in self.tools if name != PLAN_TOOL)) or "none"
            return [*found, NO_TOOL.format(id=task.id, tool=task.tool, tools=names)]
        return found + [
            ARGUMENTS.format(id=task.id, problems=problem)
            for problem in argument_problems(tool, task.arguments)
        ]


def argument_problems(tool: BaseTool, arguments: Mapping[str, object]) -> list[str]:
    """What is wrong with `arguments` for `tool`, leaving aside those holding a reference."""
    stray = set(schema_words(tool, arguments))  # dropped when the call runs, as any call's
    given = {key: value for key, value in arguments.items() if key not in stray}
    scope = getattr(tool, "scope", None)
    hidden = sorted(key for key in given if scope is not None and key in scope.hidden)
    if hidden:
        return [hidden_sent(tool.name, hidden)]
    unknown = unknown_parameters(tool, given)
    if unknown:
        known = ", ".join(sorted(_visible(tool))) or "nothing"
        names = ", ".join(repr(key) for key in unknown)
        return [UNKNOWN.format(tool=tool.name, names=names, known=known)]
    fixed: Mapping[str, object] = scope.fixed if scope is not None else {}
    merged = {**given, **fixed}
    referring = {key for key, value in given.items() if has_reference(value)}
    model = parameters_model(tool)
    if model is None:
        if referring:
            return []
        problem = json_problems_before(tool, merged, seconds=JSON_CHECK_SECONDS)
        return [problem] if problem else []
    try:
        model.model_validate(merged)
    except ValidationError as error:
        return [_problem(found) for found in error.errors() if not _refers(found, referring)]
    return []


def planned_depends_on(task: TaskSpec) -> list[str]:
    """The task's dependencies, with the tasks its arguments refer to (they must be done first)."""
    found = list(dict.fromkeys([*task.depends_on, *referenced_tasks(task.arguments)]))
    return [other for other in found if other != task.id]


def _links(task: TaskSpec) -> list[tuple[str, str]]:
    links = [("depends on", other) for other in task.depends_on]
    return links + [("refers to", other) for other in dict.fromkeys(referenced_tasks(task.arguments))]


def _twice(tasks: Sequence[TaskSpec]) -> list[str]:
    seen: set[str] = set()
    doubled = [task.id for task in tasks if task.id in seen or seen.add(task.id)]
    return [TWICE.format(id=task_id) for task_id in dict.fromkeys(doubled)]


def _cycles(tasks: Sequence[TaskSpec], *, kept: Collection[str]) -> list[str]:
    """A line naming the tasks of a dependency cycle, if there is one (kept tasks end every path)."""
    waiting = {task.id: set(planned_depends_on(task)) - set(kept) for task in tasks}
    while True:  # take away what can run, again and again: what stays is in or after a cycle
        ready = [task_id for task_id, needs in waiting.items() if not needs]
        if not ready:
            break
        for task_id in ready:
            del waiting[task_id]
        for needs in waiting.values():
            needs.difference_update(ready)
    return [CYCLE.format(ids=", ".join(sorted(waiting)))] if waiting else []


def _visible(tool: BaseTool) -> list[str]:
    return list(properties(call_schema(tool)))


def _refers(found: ErrorDetails, referring: Collection[str]) -> bool:
    return bool(found["loc"]) and found["loc"][0] in referring


def _problem(found: ErrorDetails) -> str:
    where = ".".join(str(part) for part in found["loc"]) or "value"
    return f"{where}: {found['msg']}"
