"""The operator's built-in tools: list and answer the user's pending authorization requests.

Offered only to a level configured as an operator (ORCHESTRATOR_OPERATOR for
the orchestrator's own level, `operator: true` in an agent folder's
tool_config.yaml). `get_authorization_requests` lists the same user's
paused `request_authorization` calls, in every session of theirs (row-level
security keeps everyone else's out); `approve_authorization` grants or
refuses one, and the paused run resumes as it would after the person's
answer. A level never answers its own request, nor one of the conversation
it runs in (that one is the person's to answer).
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, JsonValue

from orchestrator.errors import ToolError
from orchestrator.tools.authorizations import AuthorizationDesk
from orchestrator.tools.context import RunContext, current_context
from orchestrator.tools.decisions import ApproveDecision, Decision, RejectDecision
from orchestrator.tools.results import ToolResult

MAX_REASON_CHARS = 4000
NO_DESK = "{name} needs the database: without it, no other conversation's request can be reached."
NOT_PENDING = (
    "No pending authorization request {request_id} of this user (answered already? "
    "get_authorization_requests lists those that wait)."
)
OWN_LEVEL = (
    "Refused: {request_id} was asked by this level ({level}); a level never answers its own "
    "authorization request, the person or another operator does."
)
OWN_SESSION = (
    "Refused: {request_id} waits in this very conversation; the person answers it here."
)
NONE_WAITING = "No authorization request waits."


class ListArgs(BaseModel):
    """`get_authorization_requests` takes no arguments."""


async def _get_authorization_requests() -> ToolResult:
    """List the user's authorization requests that wait for an answer (in any of their
    conversations): who asked, for what tool, why, the risk level and urgency."""
    context, desk = _desk("get_authorization_requests")
    waiting = await desk.pending(user_id=context.user_id)
    if not waiting:
        return ToolResult(message=NONE_WAITING, data=[])
    lines = [
        f"{w.request_id}: {w.asked_by} asks for {w.tool_name} "
        f"(risk {w.risk_level}, urgency {w.urgency}): {w.reason}"
        for w in waiting
    ]
    data: list[JsonValue] = [w.to_json() for w in waiting]
    return ToolResult(message="\n".join(lines), data=data)


class ApproveArgs(BaseModel):
    request_id: str = Field(
        min_length=1,
        max_length=200,
        description="The request's id, as get_authorization_requests lists it.",
    )
    approve: bool = Field(description="True grants the authorization; false refuses it.")
    reason: str = Field(
        default="",
        max_length=MAX_REASON_CHARS,
        description="Why: the agent that asked hears it with a refusal.",
    )


async def _approve_authorization(request_id: str, approve: bool, reason: str = "") -> ToolResult:
    """Grant or refuse one of the user's pending authorization requests (never one this level
    asked itself); the paused run resumes with the answer, as after the person's."""
    context, desk = _desk("approve_authorization")
    waiting = await desk.pending(user_id=context.user_id)
    found = next((w for w in waiting if w.request_id == request_id), None)
    if found is None:
        message = NOT_PENDING.format(request_id=request_id)
        raise ToolError(message, code="not_found", recoverable=False)
    if found.session_id == context.session_id:
        message = OWN_SESSION.format(request_id=request_id)
        raise ToolError(message, code="refused", recoverable=False)
    if found.agent_path == context.agent_path:
        message = OWN_LEVEL.format(request_id=request_id, level=found.asked_by)
        raise ToolError(message, code="refused", recoverable=False)
    decision: Decision = (
        ApproveDecision(type="approve")
        if approve
        else RejectDecision(type="reject", message=reason or "refused by the operator")
    )
    outcome = await desk.answer(found, decision, user_id=context.user_id)
    said = "granted" if approve else "refused"
    data: dict[str, JsonValue] = {**found.to_json(), "decision": said, "reason": reason or None}
    return ToolResult(message=f"{request_id} {said}. {outcome}", data=data)


def _desk(name: str) -> tuple[RunContext, AuthorizationDesk]:
    context = current_context()
    if context is None or context.authorizations is None:
        raise ToolError(NO_DESK.format(name=name), recoverable=False)
    return context, context.authorizations


get_authorization_requests = StructuredTool.from_function(
    coroutine=_get_authorization_requests,
    name="get_authorization_requests",
    args_schema=ListArgs,
    description=" ".join((_get_authorization_requests.__doc__ or "").split()),
)
approve_authorization = StructuredTool.from_function(
    coroutine=_approve_authorization,
    name="approve_authorization",
    args_schema=ApproveArgs,
    description=" ".join((_approve_authorization.__doc__ or "").split()),
)


def operator_tools() -> list[BaseTool]:
    """The tools of a level configured as an operator."""
    return [get_authorization_requests, approve_authorization]
