"""Background handover: a call that is long-running by nature, or outlives its inline budget,
goes on after its turn and is reported into the session when it ends (see `conversation.job_board`, `jobs`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from langchain_core.runnables import RunnableConfig

from orchestrator.dispatch.middleware import CallRequest, Handler, visible_arguments
from orchestrator.tools.hitl import INTERACTIVE
from orchestrator.tools.request_log import Handover, safely
from orchestrator.tools.results import ToolResult

ACKNOWLEDGED = (
    "{name} goes on in the background as job {job_id}; its result will come in a later "
    "message. Tell the user it has started."
)
OUTLIVED = "outlived the inline budget"
# Keys of the graph run itself: a call that outlives the run must not carry them.
RUN_KEYS = ("checkpoint_ns", "checkpoint_id", "checkpoint_map")


class BackgroundMiddleware:
    """Hands a call to the run's background runner when it must not hold up the turn.

    Without a runner every call runs inline, as long as it takes. A call whose
    tool says `background: true` is handed over at once: queued as a job, for
    a worker (`runner.defer`), where the runner has a queue; else it starts
    here and the runner adopts it. Any other call is adopted after the level's
    inline budget. The model hears at once that it goes on. A call a worker
    runs as its job (`context.job`) runs here, the rest of the pipeline on.
    """

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        runner = request.context.background
        if runner is None or _interactive(request) or _the_job(request):
            return await handler(request)
        background = request.record.background
        if background and await runner.defer(_handover(request)):
            return acknowledgement(request)
        if background:
            request = request.override(config=_detached(request.config))  # it outlives the run
        started = datetime.now(UTC)  # a task started when its call did, not when handed over
        work = asyncio.ensure_future(handler(request))
        try:
            await asyncio.wait({work}, timeout=0.0 if background else request.policy.inline_budget)
        except asyncio.CancelledError:
            work.cancel()
            raise
        if work.done():
            return work.result()
        observer = request.context.observer
        if observer is not None and not background:  # before the runner records what it does
            await safely(observer.acknowledged(request.record, detail=OUTLIVED))
        runner.adopt(
            work, request.record, observer=observer, started_at=started, handover=_handover(request)
        )
        return acknowledgement(request)


def _the_job(request: CallRequest) -> bool:
    """Whether this is the call a worker runs as its job (handed over already)."""
    return request.context.job == request.record.request_id


def _handover(request: CallRequest) -> Handover:
    assert request.tool is not None  # validation answered calls of unknown tools
    return Handover(
        call=request.record,
        tool=request.tool,
        arguments=visible_arguments(request),
        agent_path=request.context.agent_path,
        max_retries=request.policy.max_retries,
    )


def _interactive(request: CallRequest) -> bool:
    # A call that asks the person pauses the turn at once: handed over, its question is lost.
    metadata = (request.tool.metadata or {}) if request.tool is not None else {}
    return bool(metadata.get(INTERACTIVE))


def acknowledgement(request: CallRequest) -> ToolResult:
    """What the model hears of a call that goes on in the background."""
    job_id = request.record.request_id
    return ToolResult(
        type="status",
        status="partial",
        message=ACKNOWLEDGED.format(name=request.name, job_id=job_id),
        data={"job_id": job_id, "status": "acknowledged"},
        request_id=job_id,
        parent_request_id=request.record.parent_request_id,
    )


def is_acknowledgement(result: ToolResult) -> bool:
    """Whether `result` only says the call goes on in the background."""
    data = result.data
    return result.type == "status" and isinstance(data, dict) and data.get("status") == "acknowledged"


def _detached(config: RunnableConfig | None) -> RunnableConfig | None:
    if config is None:
        return None
    configurable = {
        key: value
        for key, value in config.get("configurable", {}).items()
        if not key.startswith("__") and key not in RUN_KEYS
    }
    return {"configurable": configurable}
