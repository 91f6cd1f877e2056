"""A tool call the request log already knows is not simply run again.

A turn that a killed process left in its tools node resumes from its last
checkpoint, which re-enters the node with the same calls, and so the same
request ids (see `request_id`). What the log says of each decides:

- it ended (completed, failed, cancelled): its recorded outcome is the answer;
- it paused (a LangGraph interrupt inside it): it runs again, now resumed;
- it runs again in this process's background (recovery requeued it, being
  idempotent): the model hears that it goes on in the background;
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
from orchestrator.tools.results import ToolResult

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from orchestrator.tools.context import RunContext
    from orchestrator.tools.pipeline.records import CallRecord

logger = logging.getLogger(__name__)

# A call's request id follows from its session, its place in the graph and the
# model's tool_call_id: a resumed turn re-running the same call finds its record.
REQUEST_ID_NAMESPACE = uuid.UUID("5d0f4c1e-6a3b-4f8e-9a57-1b2c3d4e5f60")
INTERRUPTED = "interrupted: the process running it stopped"
ELSEWHERE = "{name} is already running in another process; it is not started twice"
ENDED = ("completed", "failed", "cancelled")
PAUSED = "paused"
NS_SEP = "|"  # between the levels of a LangGraph checkpoint namespace


@dataclass(frozen=True)
class PriorCall:
    """What the request log holds for a call about to run."""

    status: str
    outcome: str | None
    body: dict[str, object] | None  # the result, or the error
    owner_alive: bool
    ours: bool  # owned by this process

    @property
    def ended(self) -> bool:
        return self.outcome in ENDED or self.status in ENDED


class PriorLog(Protocol):
    """The part of the request log a replay decision needs."""

    async def prior(self, call: CallRecord) -> PriorCall | None: ...

    async def requeued(self, call: CallRecord) -> None: ...

    async def resumed(self, call: CallRecord) -> None: ...

    async def interrupted(self, call: CallRecord) -> None: ...


class RunningCheck(Protocol):
    """Whether this process runs a call in the background (the task manager)."""

    def running(self, request_id: str) -> bool: ...


@dataclass(frozen=True)
class Decision:
    """Run the call (`rerun`: its record exists), answer with `answer`, or `in_background`."""

    run: bool = True
    rerun: bool = False
    answer: ToolResult | None = None
    in_background: bool = False


FRESH = Decision()


async def decide(
    call: CallRecord, *, log: PriorLog | None, runner: RunningCheck | None
) -> Decision:
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
    if prior.ended:
        return Decision(run=False, answer=recorded_outcome(prior))
    if prior.status == PAUSED:  # it asked for something (an interrupt): the answer is here now
        await _noted(log.resumed(call))
        return Decision(rerun=True)
    if runner is not None and runner.running(call.request_id):
        return Decision(run=False, in_background=True)
    if prior.owner_alive and not prior.ours:
        elsewhere = ELSEWHERE.format(name=call.call_name)
        return Decision(run=False, answer=_failure(elsewhere, "running"))
    if call.idempotent:
        await _noted(log.requeued(call))
        return Decision(rerun=True)
    await _noted(log.interrupted(call))
    return Decision(run=False, answer=_failure(INTERRUPTED, "interrupted"))


async def _noted(note: Awaitable[None]) -> None:
    """Record a decision; what the log cannot record changes nothing about the decision."""
    try:
        await note
    except Exception as error:
        logger.warning("request log update failed: %s: %s", type(error).__name__, error)


def recorded_outcome(prior: PriorCall) -> ToolResult:
    """The outcome the log recorded, as the result envelope (a failure unless it completed)."""
    body = dict(prior.body or {})
    if prior.outcome == "completed":
        fields: dict[str, object] = body
    else:
        fields = {"error_code": prior.outcome, **body, "type": "error", "status": "failure"}
        fields.setdefault("recoverable", False)
    try:
        return ToolResult.model_validate(fields)
    except ValidationError:  # recorded by another version: keep what can be read
        if prior.outcome == "completed":
            return ToolResult(message=str(body.get("message", "")))
        return ToolResult(message=str(body.get("message", "")), status="failure", type="error")


def _failure(message: str, code: str) -> ToolResult:
    return ToolResult.from_error(ToolError(message, code=code, recoverable=False))


def request_id(
    call: ToolCall, *, context: RunContext, config: RunnableConfig | None = None
) -> str:
    """The same for the same call of the same session at the same place in the tree.

    The place is the graph's checkpoint namespace and the request the graph
    runs for. Random when the call has no session or no tool_call_id to tell
    it by.
    """
    session, call_id = context.session_id, call.get("id")
    if not session or not call_id:
        return uuid.uuid4().hex
    task_ns = str((config or {}).get("configurable", {}).get("checkpoint_ns", ""))
    graph_ns = task_ns.rpartition(NS_SEP)[0]  # without the tool task's own segment
    key = "\x1f".join((session, graph_ns, context.request_id or "", str(call_id)))
    return uuid.uuid5(REQUEST_ID_NAMESPACE, key).hex
