"""A tool call the request log already knows is not simply run again.

A turn that a killed process left in its tools node resumes from its last
checkpoint, which re-enters the node with the same calls, and so the same
request ids (see `request_id`). What the log says of each decides:

- it is another call (another tool or other arguments under the same id):
  the call runs under a new id; another call's result is never its answer;
- it ended (completed, failed, cancelled): its recorded outcome is the answer;
- it paused (a LangGraph interrupt inside it): it runs again, now resumed;
- it runs again in this process's background (recovery requeued it, being
  idempotent), or a job of the queue holds it: the model hears that it goes
  on in the background;
- it runs in another live process: it fails here, it is not started twice;
- a dead process left it open: an idempotent call runs again, any other
  fails as interrupted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from langchain_core.messages import ToolCall
from pydantic import ValidationError

from orchestrator.errors import ToolError
from orchestrator.tools.request_log import (
    INTERRUPTED,
    TASK_ID_KEY,
    CallRecord,
    PriorCall,
    PriorLog,
)
from orchestrator.tools.request_status import RequestStatus
from orchestrator.tools.results import ToolResult

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from orchestrator.tools.context import RunContext

logger = logging.getLogger(__name__)

# A call's request id follows from its session, its parent request and its LangGraph
# task: a resumed turn re-running the same call finds its record.
REQUEST_ID_NAMESPACE = uuid.UUID("5d0f4c1e-6a3b-4f8e-9a57-1b2c3d4e5f60")
ELSEWHERE = "{name} is already running in another process; it is not started twice"


class RunningCheck(Protocol):
    """Whether this process runs a call in the background (the task manager)."""

    def running(self, request_id: str) -> bool: ...


@dataclass(frozen=True)
class ReplayDecision:
    """Run the call (`rerun`: its record exists), answer with `answer`, or `in_background`.

    `taken`: the request id is another call's, so this one runs under a new id.
    """

    run: bool = True
    rerun: bool = False
    answer: ToolResult | None = None
    in_background: bool = False
    taken: bool = False


FRESH = ReplayDecision()


async def decide(
    call: CallRecord, *, log: PriorLog | None, runner: RunningCheck | None
) -> ReplayDecision:
    """Whether and how `call` runs, given what the request log already holds for it."""
    if log is None:
        return FRESH
    try:
        prior = await log.prior(call)
    except Exception as error:  # the log must never cost the user a tool result
        logger.warning("request log lookup failed: %s: %s", type(error).__name__, error)
        return FRESH
    if prior is None:
        return FRESH
    if not prior.same_call:
        logger.warning("request %s belongs to another call; %s runs anew", call.request_id, call.call_name)
        return ReplayDecision(taken=True)
    if prior.ended:
        return ReplayDecision(run=False, answer=recorded_outcome(prior))
    if prior.status == RequestStatus.PAUSED:  # it asked for something (an interrupt): the answer is here now
        await _noted(log.resumed(call))
        return ReplayDecision(rerun=True)
    if prior.queued or (runner is not None and runner.running(call.request_id)):
        return ReplayDecision(run=False, in_background=True)
    if prior.owner_alive and not prior.ours:
        elsewhere = ELSEWHERE.format(name=call.call_name)
        return ReplayDecision(run=False, answer=_failure(elsewhere, "running"))
    if call.idempotent:
        await _noted(log.requeued(call))
        return ReplayDecision(rerun=True)
    await _noted(log.interrupted(call))
    return ReplayDecision(run=False, answer=_failure(INTERRUPTED, "interrupted"))


async def _noted(note: Awaitable[None]) -> None:
    """Record a decision; what the log cannot record changes nothing about the decision."""
    try:
        await note
    except Exception as error:
        logger.warning("request log update failed: %s: %s", type(error).__name__, error)


def recorded_outcome(prior: PriorCall) -> ToolResult:
    """The outcome the log recorded, as the result envelope (a failure unless it completed)."""
    body = dict(prior.body or {})
    if prior.outcome == RequestStatus.COMPLETED:
        fields: dict[str, object] = body
    else:
        fields = {"error_code": prior.outcome, **body, "type": "error", "status": "failure"}
        fields.setdefault("recoverable", False)
    try:
        return ToolResult.model_validate(fields)
    except ValidationError:  # recorded by another version: keep what can be read
        if prior.outcome == RequestStatus.COMPLETED:
            return ToolResult(message=str(body.get("message", "")))
        return ToolResult(message=str(body.get("message", "")), status="failure", type="error")


def _failure(message: str, code: str) -> ToolResult:
    return ToolResult.from_error(ToolError(message, code=code, recoverable=False))


def request_id(
    call: ToolCall, *, context: RunContext, config: RunnableConfig | None = None
) -> str:
    """The same for the same call every time its model step runs, and no other call's.

    A call is known by the LangGraph task that runs it: the task's id follows
    from the checkpoint of the model step that asked for the call, the graph's
    namespace and the call's place among the step's calls, so a resumed step
    gets the same ids, and a later step, in any turn, others (model servers
    reuse tool-call ids). Random outside a session's graph task.
    """
    task = (config or {}).get("configurable", {}).get(TASK_ID_KEY)
    if not context.session_id or not isinstance(task, str):
        return uuid.uuid4().hex
    key = "\x1f".join((context.session_id, context.request_id or "", task))
    return uuid.uuid5(REQUEST_ID_NAMESPACE, key).hex
