"""What the model and the person hear when a plan's run ends.

The model gets the answer to its plan call: every task with its status and
result (each result cut to the level's result size, as any call's is), and
what to do next: answer from the results, or, after a failure, revise the
tasks not yet done. Past the re-plan limit the person gets a notice instead of
another round: what was done, and what was not.
"""

from __future__ import annotations

import json

from orchestrator.errors import ToolError
from orchestrator.plans import Plan, PlanTask
from orchestrator.tools.results import ToolResult

ALL_DONE = "Every task of the plan is done. Answer the user from their results."
TASK_FAILED = "Task {id} ({tool}) failed: {error}"
DONE_AND_KEPT = "Done, and kept: {ids}."
NOT_RUN = "Not run: {ids}."
REVISE = (
    "You may revise the tasks not yet done: call create_execution_plan with only those "
    "(done tasks are kept and never run again; their results can be used as "
    "{{{{{example}.data...}}}}), or answer the user with what was done. "
    "Re-plans left: {left}."
)
NO_REPLANS_LEFT = (
    "The re-plan limit ({limit}, ORCHESTRATOR_MAX_REPLANS) is reached: the plan stops here."
)
STOPPED_NOTICE = (
    "I stopped: a task of the plan failed, and {replans} re-plan(s) is the limit "
    "(ORCHESTRATOR_MAX_REPLANS)."
)
NO_ERROR = "no error was given"


def plan_outcome(plan: Plan, *, max_result_chars: int, left: int) -> ToolResult:
    """The answer to the plan call when `plan` ended (`left`: re-plans the model may still make)."""
    data: dict[str, object] = {"goal": plan["goal"], "tasks": [_task(t, max_result_chars) for t in plan["tasks"]]}
    failed = [task for task in plan["tasks"] if task["status"] == "failed"]
    note = f"{plan['note']} " if plan["note"] else ""
    if not failed:
        # The tasks' results are JSON typed as objects; ToolResult validates `data` as JSON.
        return ToolResult(message=note + ALL_DONE, data=data)  # pyright: ignore[reportArgumentType]
    lines = [TASK_FAILED.format(id=t["id"], tool=t["tool"], error=_error(t)) for t in failed]
    done = [task["id"] for task in plan["tasks"] if task["status"] == "done"]
    if done:
        lines.append(DONE_AND_KEPT.format(ids=", ".join(done)))
    skipped = [task["id"] for task in plan["tasks"] if task["status"] == "skipped"]
    if skipped:
        lines.append(NOT_RUN.format(ids=", ".join(skipped)))
    example = done[0] if done else "t1"
    lines.append(REVISE.format(example=example, left=left) if left else _limit(plan))
    error = ToolError(note + " ".join(lines), code="task_failed", recoverable=left > 0)
    return ToolResult.from_error(error).model_copy(update={"data": data})


def stopped_notice(plan: Plan) -> str:
    """The turn's end past the re-plan limit: what was done, and what was not."""
    lines = [STOPPED_NOTICE.format(replans=plan["replans"])]
    done = [_named(task) for task in plan["tasks"] if task["status"] == "done"]
    lines.append(f"Done: {'; '.join(done)}." if done else "Nothing was done.")
    missing = [
        f"{_named(task)}: {'failed: ' + _error(task) if task['status'] == 'failed' else 'not run'}"
        for task in plan["tasks"]
        if task["status"] != "done"
    ]
    lines.append(f"Not done: {'; '.join(missing)}.")
    return "\n".join(lines)


def _limit(plan: Plan) -> str:
    return NO_REPLANS_LEFT.format(limit=plan["replans"])


def _task(task: PlanTask, max_result_chars: int) -> dict[str, object]:
    shown: dict[str, object] = {"id": task["id"], "tool": task["tool"], "status": task["status"]}
    if task["result"] is not None:
        shown["result"] = _result(task["result"], max_result_chars)
    return shown


def _result(result: dict[str, object], max_chars: int) -> object:
    """The result as the model reads any call's: cut to the result size (then as text)."""
    try:
        text = ToolResult.model_validate(result).to_model_text(max_chars=max_chars)
    except ValueError:  # not an envelope: shown as it is
        text = json.dumps(result, ensure_ascii=False, default=str)[:max_chars]
    try:
        return json.loads(text)
    except ValueError:  # cut, with its note: text
        return text


def _error(task: PlanTask) -> str:
    message = (task["result"] or {}).get("message")
    return str(message) if message else NO_ERROR


def _named(task: PlanTask) -> str:
    return f"{task['id']} ({task['description']})"
