"""The approval hook: a call may need a decision before it runs (human in the loop).

`ApprovalMiddleware` puts each call to its gates. The default pipeline's gate,
`SensitiveCallGate`, pauses the turn before every call that needs the
person's decision (see `folders.sensitivity` for which and why) with a
`hitl.Question` of kind "approval", and goes on as the answer says:

- approve: the call runs as the model made it;
- edit: it runs with the person's arguments (those the model may set: fixed
  ones are added as they are to the model's), validated against the action's
  parameters; an edit that does not fit is asked again, saying what was wrong;
- reject: it does not run; the model hears "The user rejected this call: <reason>".

Every answer is recorded in the request log under the call's request id.

Where no person watches (`orchestrator mcp serve`), `UnattendedGate` takes its
place: it never asks, and refuses what would need someone to answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Protocol

from langchain_core.tools import BaseTool
from pydantic import ValidationError

from orchestrator.dispatch.json_shape import call_schema, properties
from orchestrator.dispatch.middleware import CallRequest, Handler, visible_arguments
from orchestrator.dispatch.validate import parameters_model, unknown_parameters
from orchestrator.errors import ToolError, validation_problems
from orchestrator.folders.sensitivity import SensitivityRules
from orchestrator.sources.adapter import ActionTool
from orchestrator.tools.hitl import ALLOWED, INTERACTIVE, Decision, Question, ask_person, can_ask
from orchestrator.tools.request_log import APPROVED, EDITED, INVALID_EDIT, REJECTED, safely
from orchestrator.tools.results import ToolResult
from orchestrator.tools.risk import risk_of
from orchestrator.tracing.spans import annotate

REJECTED_MESSAGE = "The user rejected this call"
REJECTED_CODE = "rejected"
NO_ONE_TO_ASK = (
    "{name} needs the user's decision before it runs, and there is no conversation to ask "
    "in: it did not run"
)
UNATTENDED = (
    "{name} needs the user's decision before it runs ({why}), and no one can be asked here: "
    "it did not run. {advice}"
)
NO_PERSON = "{name} asks the user, and no one can be asked here: go on without an answer"
UNATTENDED_APPROVAL = "unattended"  # who approved a call no one was asked about
EDITED_NOTE = "The user changed the arguments before the call ran; it ran with {arguments}. "
OTHER_TOOL = "an edit may change the arguments, not the tool: {edited!r} is not {name!r}"
FIXED_SET = "the edit sets {names}, which the tool's configuration fixes: leave them out"
UNKNOWN_SET = "the edit sets {names}, which {tool} does not take (it takes {known})"


class Gate(Protocol):
    """Decides whether a call may run: as it is, changed, or not at all.

    Returns the request to run (the same one, or one with edited arguments)
    or the result to answer with instead (a refusal). A gate that must ask a
    person calls LangGraph's `interrupt()`, which this pipeline lets through.
    """

    async def review(self, request: CallRequest) -> CallRequest | ToolResult: ...


class ApprovalMiddleware:
    """Puts each call to the gates in order; the first refusal answers the call.

    When a gate changed the arguments (the person edited them), the model
    hears so before the result, with the arguments the call ran with.
    """

    def __init__(self, gates: Sequence[Gate] = ()) -> None:
        self.gates = list(gates)

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        proposed = request.arguments
        for gate in self.gates:
            decision = await gate.review(request)
            if isinstance(decision, ToolResult):
                return decision
            request = decision
        result = await handler(request)
        if request.arguments == proposed:
            return result
        arguments = json.dumps(visible_arguments(request), ensure_ascii=False, default=str)
        note = EDITED_NOTE.format(arguments=arguments)
        return result.model_copy(update={"message": note + result.message})


class SensitiveCallGate:
    """Asks the person before each call that needs a decision: approve, edit or reject.

    Which calls need one, `rules` says (see `folders.sensitivity`). Outside a
    graph run (a call run again by recovery) no one can be asked: such a call
    does not run; nor does one made inside a job a worker runs. The job's own
    call was decided on before it was handed over: it runs as decided.
    """

    def __init__(self, rules: SensitivityRules | None = None) -> None:
        self.rules = rules or SensitivityRules()

    async def review(self, request: CallRequest) -> CallRequest | ToolResult:
        tool = request.tool
        why = self.rules.why(request.name, tool.metadata if tool is not None else None)
        if why is None or tool is None or request.context.job == request.record.request_id:
            return request
        if (unconfigured := configuration_problem(request)) is not None:
            return unconfigured  # nothing to decide on: the call could not run
        if not can_ask() or request.context.job is not None:
            message = NO_ONE_TO_ASK.format(name=request.name)
            return request.failed(ToolError(message, code=REJECTED_CODE, recoverable=False))
        number, problem = 0, None
        while True:  # an edit that does not fit asks again; the answers come in order
            decision = ask_person(approval_question(request, why=why, problem=problem))
            answer = await _answered(request, decision, number=number)
            if not isinstance(answer, str):
                return answer
            number, problem = number + 1, answer


class UnattendedGate:
    """Decides without anyone to ask; it never calls `interrupt()` (for `orchestrator mcp serve`).

    A call that needs the person's decision (see `folders.sensitivity`) runs
    only with `allow_sensitive` (recorded in the request log as approved,
    unattended); otherwise it is refused, `advice` saying how to allow it. A
    call of a tool that asks the person (`ask_human`, `request_authorization`)
    is refused: no answer would ever come.
    """

    def __init__(
        self,
        rules: SensitivityRules | None = None,
        *,
        allow_sensitive: bool = False,
        advice: str = "",
    ) -> None:
        self.rules = rules or SensitivityRules()
        self.allow_sensitive = allow_sensitive
        self.advice = advice

    async def review(self, request: CallRequest) -> CallRequest | ToolResult:
        tool = request.tool
        if tool is None:
            return request
        metadata = tool.metadata or {}
        if metadata.get(INTERACTIVE):
            message = NO_PERSON.format(name=request.name)
            return request.failed(ToolError(message, code=REJECTED_CODE, recoverable=False))
        why = self.rules.why(request.name, metadata)
        if why is None:
            return request
        if (unconfigured := configuration_problem(request)) is not None:
            return unconfigured
        if self.allow_sensitive:
            args = dict(request.call["args"])
            detail = {"decision": "approve", "args": args, "by": UNATTENDED_APPROVAL}
            await _note(request, APPROVED, detail, number=0)
            return request
        message = UNATTENDED.format(name=request.name, why=why, advice=self.advice).strip()
        return request.failed(ToolError(message, code=REJECTED_CODE, recoverable=False))


def configuration_problem(request: CallRequest) -> ToolResult | None:
    """The failure of a call whose tool is not configured (see `Tool.settings_model`), if so."""
    tool = request.tool
    problem = (
        tool.owner.configuration_problem(action=tool.spec.name)
        if isinstance(tool, ActionTool)
        else None
    )
    return request.failed(problem) if problem is not None else None


async def _answered(
    request: CallRequest, decision: Decision, *, number: int
) -> CallRequest | ToolResult | str:
    """What the call does after `decision`: run (edited or not), not run, or ask again."""
    asked = dict(request.call["args"])
    if decision["type"] == "approve":
        await _note(request, APPROVED, {"decision": "approve", "args": asked}, number=number)
        return request
    if decision["type"] == "edit":
        edited = decision["edited_action"]
        outcome = edited_request(request, name=edited["name"], arguments=edited["args"])
        detail = {"decision": "edit", "args": asked, "edited_args": edited["args"]}
        if isinstance(outcome, str):
            await _note(request, INVALID_EDIT, {**detail, "problem": outcome}, number=number)
        else:
            await _note(request, EDITED, detail, number=number)
        return outcome
    reason = decision.get("message") or None
    detail = {"decision": "reject", "args": asked, "reason": reason}
    await _note(request, REJECTED, detail, number=number)
    message = f"{REJECTED_MESSAGE}: {reason}" if reason else REJECTED_MESSAGE
    return request.failed(ToolError(message, code=REJECTED_CODE, recoverable=False))


def approval_question(
    request: CallRequest, *, why: str, problem: str | None = None
) -> Question:
    """What the person is asked about `request`: the call as the model made it, and why it asks.

    The arguments are the model's own (never the values the configuration
    fixes); `args_schema` is the schema the model sees, which an edit follows;
    `risk_level` and `urgency` are what its folder or author say (see `risk`).
    """
    tool = request.tool
    assert tool is not None  # validation answered calls of unknown tools
    question = Question(
        kind="approval",
        request_id=request.record.request_id,
        agent_path=list(request.context.agent_path),
        action={
            "name": request.name,
            "args": dict(request.call["args"]),
            "description": tool.description,
        },
        allowed=list(ALLOWED["approval"]),
        args_schema=edit_schema(tool),
        why=why,
        **risk_of(tool.metadata),
    )
    if problem is not None:
        question["problem"] = problem
    return question


def edited_request(
    request: CallRequest, *, name: str, arguments: Mapping[str, object]
) -> CallRequest | str:
    """`request` with the person's `arguments`, checked as the model's would be; else the problem.

    The fixed parameters of the tool's scope are added as they are to the
    model's arguments (see `pipeline.scope`); setting one is a problem.
    """
    if name != request.name:
        return OTHER_TOOL.format(edited=name, name=request.name)
    scope = getattr(request.tool, "scope", None)
    merged = dict(arguments)
    if scope is not None:
        fixed = sorted(key for key in arguments if key in scope.hidden)
        if fixed:
            return FIXED_SET.format(names=", ".join(repr(key) for key in fixed))
        merged.update(scope.fixed)
    assert request.tool is not None
    unknown = unknown_parameters(request.tool, arguments)
    if unknown:
        known = ", ".join(sorted(properties(edit_schema(request.tool)))) or "nothing"
        names = ", ".join(repr(key) for key in unknown)
        return UNKNOWN_SET.format(names=names, tool=request.name, known=known)
    schema = parameters_model(request.tool)
    if schema is None:  # a raw JSON schema: the tool checks its own input
        return request.override(arguments=merged, parsed=None)
    try:
        parsed = schema.model_validate(merged)
    except ValidationError as error:
        return validation_problems(error)
    return request.override(arguments=merged, parsed=parsed)


def edit_schema(tool: BaseTool) -> dict[str, object]:
    """The JSON schema of the arguments the model (and so an edit) may set."""
    return call_schema(tool)


async def _note(
    request: CallRequest, outcome: str, detail: Mapping[str, object], *, number: int
) -> None:
    # On the call's span too, when traced: who decided what.
    decided_by = detail.get("by")
    annotate(
        {
            "orchestrator.decision": outcome,
            "orchestrator.decided_by": decided_by if isinstance(decided_by, str) else "person",
        }
    )
    observer = request.context.observer
    if observer is None:
        return
    risk = risk_of(request.tool.metadata if request.tool is not None else None)
    await safely(
        observer.decided(
            request.record.request_id,
            user_id=request.record.user_id,
            outcome=outcome,
            detail={**detail, **risk},
            question=number,
        )
    )
