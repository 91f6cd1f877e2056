"""The request log around each call: recorded when it starts, ends, pauses or is cancelled."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace

from langgraph.errors import GraphBubbleUp, GraphInterrupt

from orchestrator.dispatch.background import acknowledgement, is_acknowledgement
from orchestrator.dispatch.json_shape import is_mapping
from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.dispatch.replay import decide
from orchestrator.plans import PLAN_TOOL
from orchestrator.tools.request_log import Asked, CallRecord, CallTask, RequestObserver, safely
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)


class RequestLogMiddleware:
    """Tells the run's observer (the request log) how the call goes.

    A call the log already knows (a resumed turn, a recovered call) is not
    simply run again: `replay.decide` says whether it runs, is answered from
    the log, or goes on in the background; the call a worker took as its job
    (`context.job`) runs. A call that pauses (a LangGraph
    interrupt inside it) is recorded as paused, with the questions it asks, so
    that resuming runs it again.
    """

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        observer, record = request.context.observer, request.record
        if observer is None:
            return await handler(request)
        # A new call is recorded at once; only one the log knew is judged by what it holds.
        job = request.context.job == record.request_id  # taken by this worker, which recorded it
        if not job and not await _started(observer, record):
            decision = await decide(record, log=observer, runner=request.context.background)
            if decision.taken:  # the id is another call's: this one is new, under an id of its own
                record = replace(record, request_id=uuid.uuid4().hex)
                request = request.override(record=record)
                await _started(observer, record)
            elif decision.in_background:
                return acknowledgement(request)
            elif decision.answer is not None:
                return decision.answer.model_copy(update=request.ids)
        try:
            result = await handler(request)
        except GraphBubbleUp as bubble:  # an interrupt: the call runs again when the turn resumes
            await safely(observer.paused(record, asked=asked_by(record, bubble)))
            raise
        except asyncio.CancelledError:  # the turn was cancelled (Ctrl-C): so is its call
            await asyncio.shield(safely(observer.cancelled(record)))
            raise
        # A background call is recorded when it ends; an accepted plan when its tasks have
        # (the plan node records it, so that it closes after them, as any parent does).
        if not is_acknowledgement(result) and not ends_with_its_tasks(request, result):
            # Its result goes into the task's checkpoint writes, which the end commits
            # with: a crash that loses the end loses the result too, and the call is
            # then known only as started (as mid-call).
            await safely(observer.finished(record, result, task=CallTask.of(request.config)))
        return result


def ends_with_its_tasks(request: CallRequest, result: ToolResult) -> bool:
    """Whether the call is an accepted plan: its tasks run next, under its request."""
    return request.name == PLAN_TOOL and result.status == "success"


async def _started(observer: RequestObserver, record: CallRecord) -> bool:
    """Whether the call was new to the log and is now recorded (a failing log: taken as new)."""
    try:
        return await observer.started(record)
    except Exception as error:  # the log must never cost the user a tool result
        logger.warning("request tracking failed: %s: %s", type(error).__name__, error)
        return True


def asked_by(record: CallRecord, bubble: GraphBubbleUp) -> list[Asked]:
    """The questions `record`'s call asks among the interrupts going up.

    A question of a call below it (a `hitl.Question` naming another request)
    is that call's: its own log records it. An interrupt that names no request
    is recorded with each call it passes.
    """
    if not isinstance(bubble, GraphInterrupt) or not bubble.args:
        return []
    return [
        Asked(interrupt_id=found.id, question=found.value)
        for found in bubble.args[0]
        if _asker(found.value) in (None, record.request_id)
    ]


def _asker(value: object) -> object:
    return value.get("request_id") if is_mapping(value) else None
