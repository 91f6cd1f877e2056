"""The plan executor: a plan's tasks run as LangGraph tasks, each through the dispatch pipeline.

After the tools node accepted a plan, the model node hands over to the
executor (it does not call the model while the plan runs), and the router
sends every task whose dependencies are done to the plan-task node, one
LangGraph task each: they run at once, and each outcome is saved as it ends
(a resumed turn runs only the tasks that had not ended). After each round of
tasks the plan node looks at the plan once (a conditional edge after the
tasks would be followed once per task, each seeing only its own outcome):
while tasks are ready and none failed, they are sent; else it answers the
plan call with every result, and the model answers (or re-plans); past the
re-plan limit, the turn ends.

A task is a call like any other: the dispatch pipeline runs it (request log
with the plan's request as its parent, scope, validation, the person's
approval, budgets, timeouts, usage), with the references to earlier results
in its arguments resolved first. A plan waits for its tasks: none goes to
the background, where its dependents could not have its result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypedDict

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END  # pyright: ignore[reportMissingTypeStubs]  # langgraph is a namespace package: its py.typed is not read
from langgraph.runtime import Runtime
from langgraph.types import Send

from orchestrator.dispatch.background import is_acknowledgement
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.dispatch.middleware import CallRequest
from orchestrator.errors import UnresolvedReferenceError
from orchestrator.events import Stage, ToolPhase, emit_plan, emit_status
from orchestrator.graph.model_pipeline.model_call import STOPPED, StateUpdate
from orchestrator.graph.node_support import MODEL_NODE, identified, run_context
from orchestrator.graph.planning.lifecycle import ended, ready
from orchestrator.graph.planning.references import referenced_tasks, resolve_arguments
from orchestrator.graph.planning.report import plan_outcome, stopped_notice
from orchestrator.graph.state import OrchestratorState
from orchestrator.levels import Planning
from orchestrator.plans import PLAN_TOOL, Plan, PlanTask, TaskOutcome, plan_view
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallRecord, CallTask, safely
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import span

PLAN_TASK_NODE = "plan_task"
PLAN_NODE = "plan"



class PlanTaskInput(TypedDict):
    """What the router sends one task's LangGraph task: the task, and the results it refers to.

    `parent` is the plan call's request (the task's parent in the request
    log); `index` and `total` place the task in its plan.
    """

    task: PlanTask
    results: dict[str, dict[str, object] | None]
    parent: str
    plan_id: str
    under: str | None
    index: int
    total: int


def route_plan(state: OrchestratorState) -> list[Send] | str:
    """Each ready task to a task of its own while the plan runs; the plan node when none is
    ready or one failed; once it ended, the model (the end of the turn past the re-plan limit)."""
    plan = state.get("plan")
    if not plan or plan["status"] != "running":
        return END if plan and plan["status"] == "stopped" else MODEL_NODE
    tasks = _to_run(plan)
    if not tasks:
        return PLAN_NODE
    by_id = {task["id"]: task for task in plan["tasks"]}
    return [
        Send(PLAN_TASK_NODE, _input(task, plan, by_id=by_id, index=plan["tasks"].index(task) + 1))
        for task in tasks
    ]


def _input(task: PlanTask, plan: Plan, *, by_id: dict[str, PlanTask], index: int) -> PlanTaskInput:
    referred = dict.fromkeys(referenced_tasks(task["arguments"]))
    return PlanTaskInput(
        task=task,
        results={other: by_id[other]["result"] for other in referred if other in by_id},
        parent=plan["request_id"],
        plan_id=plan["id"],
        under=plan["under"],
        index=index,
        total=len(plan["tasks"]),
    )


def _to_run(plan: Plan) -> list[PlanTask]:
    """The tasks to run now: the ready ones, unless a task failed (the model hears of it first)."""
    if any(task["status"] == "failed" for task in plan["tasks"]):
        return []
    return ready(plan)


class PlanTaskNode:
    """Runs one task of a plan through the dispatch pipeline, as a LangGraph task of its own."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    async def __call__(
        self, sent: PlanTaskInput, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        task = sent["task"]
        context = run_context(runtime, config).below(sent["parent"])
        try:
            arguments = resolve_arguments(task["arguments"], sent["results"])
        except UnresolvedReferenceError as error:
            return _outcome(sent, ToolResult.from_error(error))
        call = ToolCall(name=task["tool"], args=arguments, id=f"{sent['plan_id']}:{task['id']}")
        request = _inline(
            self.dispatcher.request(
                call, context, index=sent["index"], total=sent["total"], config=config
            )
        )
        emit_plan(
            sent["plan_id"], under=sent["under"], task=task["id"], status="running",
            request_id=request.record.request_id,
        )
        request.emit(ToolPhase.STARTING)
        attributes = {"orchestrator.plan_id": sent["plan_id"], "orchestrator.plan_task": task["id"]}
        with span(f"plan_task {task['id']}", attributes):  # the task's call span below it
            result = await self.dispatcher.dispatch(request)
        request.emit(ToolPhase.COMPLETED, status=result.status)
        return _outcome(sent, result)


def _inline(request: CallRequest) -> CallRequest:
    """`request` to be waited for, whatever its tool's policy (see the module's docstring)."""
    return request.override(
        policy=replace(request.policy, background=False, inline_budget=None),
        record=replace(request.record, background=False),
    )


def _outcome(sent: PlanTaskInput, result: ToolResult) -> StateUpdate:
    task = sent["task"]
    status = "failed" if result.status == "failure" or is_acknowledgement(result) else "done"
    emit_plan(
        sent["plan_id"], under=sent["under"], task=task["id"], status=status,
        request_id=result.request_id,
    )
    outcome = TaskOutcome(
        task=task["id"],
        status=status,
        request_id=result.request_id,
        result=result.model_dump(mode="json", exclude_none=True),
    )
    return {"plan": outcome}


class PlanNode:
    """After each round of tasks: nothing to do while tasks are ready (the router sends them);
    else it answers the plan call with how its tasks went (past the re-plan limit, with the
    turn's end)."""

    def __init__(self, planning: Planning, *, max_result_chars: int) -> None:
        self.planning = planning
        self.max_result_chars = max_result_chars

    async def __call__(
        self, state: OrchestratorState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> StateUpdate:
        plan = state.get("plan")
        if not plan or plan["status"] != "running" or _to_run(plan):
            return {}
        failed = any(task["status"] == "failed" for task in plan["tasks"])
        left = self.planning.max_replans - plan["replans"]
        status = "done" if not failed else "failed" if left > 0 else "stopped"
        finished = ended(plan, status)
        outcome = plan_outcome(finished, max_result_chars=self.max_result_chars, left=max(left, 0))
        emit_plan(finished["id"], under=finished["under"], plan=plan_view(finished))
        await end_plan_request(finished, outcome, context=run_context(runtime, config), config=config)
        messages: list[ToolMessage | AIMessage] = [_answer(finished, outcome)]
        if status == "stopped":
            messages.append(identified(AIMessage(content=stopped_notice(finished))))
            emit_status(Stage.COMPLETE, STOPPED)
        return {"plan": finished, "messages": messages}


async def end_plan_request(
    plan: Plan, outcome: ToolResult, *, context: RunContext, config: RunnableConfig | None = None
) -> None:
    """Record the end of the plan call's request, now that its tasks' requests have closed.

    The log leaves an accepted plan's call open (see `dispatch.log`): it closes after its tasks.
    """
    if context.observer is None:
        return
    record = CallRecord(
        request_id=plan["request_id"],
        parent_request_id=plan["under"],
        session_id=context.session_id,
        user_id=context.user_id,
        tool=PLAN_TOOL,
        action=None,
        call_name=PLAN_TOOL,
        parameters={},
    )
    await safely(context.observer.finished(record, outcome, task=CallTask.of(config)))


def _answer(plan: Plan, outcome: ToolResult) -> ToolMessage:
    result = outcome.model_copy(update={"request_id": plan["request_id"]})
    return identified(
        ToolMessage(
            content=result.to_model_text(max_chars=1 << 30),  # each result is cut already
            tool_call_id=plan["call_id"],
            name=PLAN_TOOL,
            status="error" if result.status == "failure" else "success",
            artifact=result.model_dump(mode="json"),
        )
    )
