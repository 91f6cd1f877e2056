"""`create_execution_plan`: the built-in tool with which a level's model lays out a plan.

Its call runs through the dispatch pipeline as any call does (the request
log, validation, the person's approval when plans are approved, ...): the
pipeline's validation checks the plan against the level (see `validation`),
so an invalid plan goes back to the model as an error naming what is wrong,
and an edit of the plan that does not fit is asked again. The tool itself
only hands the valid plan on; the graph runs it (see `executor`).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool
from pydantic import ConfigDict, PrivateAttr, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from orchestrator.errors import InvalidToolArgumentsError, ToolError, validation_problems
from orchestrator.folders.sensitivity import BY_PLANNING
from orchestrator.graph.planning.validation import (
    PlanArguments,
    PlanRules,
    TaskSpec,
    planned_depends_on,
)
from orchestrator.levels import Planning
from orchestrator.plans import PLAN_TOOL, PlanTask
from orchestrator.tools.results import ToolResult

PLAN_DESCRIPTION = (
    "Lay out work that takes several tool calls as a plan of tasks, each a call of one of "
    "your tools. The tasks run for you, at once unless one depends on another, and you get "
    "every result to answer from. A task may use an earlier task's result: "
    '"{{t1.data.city}}" in its arguments is the city in task t1\'s result data. For one or '
    "two independent calls, call the tools directly."
)
ACCEPTED = "The plan is accepted: its {count} task(s) run now; their results come back to you."
GRAPH_ONLY = "create_execution_plan runs inside an agent graph only"
INVALID_PLAN = "Invalid arguments for create_execution_plan: {problems}."


class PlanTool(BaseTool):
    """A level's plan tool: its arguments' schema checks a plan against the level's `rules`.

    `revising(kept)` is the same tool for a re-plan, which keeps the finished
    tasks of the plan it revises (they may be depended on and referred to).
    """

    name: str = PLAN_TOOL
    description: str = PLAN_DESCRIPTION
    _rules: PlanRules = PrivateAttr()

    @classmethod
    def of(cls, rules: PlanRules, *, metadata: dict[str, object]) -> PlanTool:
        """The plan tool checking plans against `rules`."""
        tool = cls(args_schema=checked_arguments(rules), metadata=metadata)
        tool._rules = rules
        return tool

    @property
    def rules(self) -> PlanRules:
        """What a plan may hold at this tool's level."""
        return self._rules

    def revising(self, kept: Sequence[PlanTask]) -> PlanTool:
        """This tool for a re-plan keeping the finished tasks `kept`."""
        rules = PlanRules(self.rules.tools, max_tasks=self.rules.max_tasks, kept=tuple(kept))
        return PlanTool.of(rules, metadata=dict(self.metadata or {}))

    async def call_tool(self, arguments: dict[str, object]) -> ToolResult:
        """The valid plan, for the graph to run: its goal and its tasks still to do."""
        schema = self.args_schema
        assert isinstance(schema, type) and issubclass(schema, PlanArguments)
        try:
            plan = schema.model_validate(arguments)
        except ValidationError as error:  # the pipeline checked it: only a call from elsewhere
            raise InvalidToolArgumentsError(
                INVALID_PLAN.format(problems=validation_problems(error))
            ) from None
        kept = {task["id"] for task in self.rules.kept}
        tasks = [_planned(task) for task in plan.tasks if task.id not in kept]
        data: dict[str, object] = {"goal": plan.goal, "tasks": tasks}
        # The tasks' arguments are JSON typed as objects; ToolResult validates `data` as JSON.
        return ToolResult(message=ACCEPTED.format(count=len(tasks)), data=data)  # pyright: ignore[reportArgumentType]

    def _run(self, *args: object, **kwargs: object) -> object:
        raise ToolError(GRAPH_ONLY, recoverable=False)


def plan_tool(tools: Sequence[BaseTool], planning: Planning) -> PlanTool:
    """The plan tool of a level with `tools` and `planning` (its limit, whether plans are approved)."""
    rules = PlanRules({tool.name: tool for tool in tools}, max_tasks=planning.max_tasks)
    metadata: dict[str, object] = {"sensitive": BY_PLANNING} if planning.approve else {}
    return PlanTool.of(rules, metadata=metadata)


def checked_arguments(rules: PlanRules) -> type[PlanArguments]:
    """The plan's arguments as the model sees them, checked against `rules` when validated."""

    class CheckedPlan(PlanArguments):
        model_config = ConfigDict(title=PLAN_TOOL)

        @field_validator("tasks")
        @classmethod
        def _valid_for_the_level(cls, tasks: list[TaskSpec]) -> list[TaskSpec]:
            problems = rules.problems(tasks)
            if problems:  # the message alone: "tasks: ..." says where
                raise PydanticCustomError("invalid_plan", "{problems}", {"problems": "; ".join(problems)})
            return tasks

    return CheckedPlan


def _planned(task: TaskSpec) -> dict[str, object]:
    return {
        "id": task.id,
        "description": task.description,
        "tool": task.tool,
        "arguments": task.arguments,
        "depends_on": planned_depends_on(task),
    }
