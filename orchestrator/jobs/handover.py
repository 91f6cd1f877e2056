"""A background call as a job: its arguments, from the handover the dispatch pipeline made.

And what becomes of a call that could not be held as a job: it still runs
here, and is recorded when it ends, as a task of this process would be.
"""

from __future__ import annotations

import asyncio

from orchestrator.folders.discovery import ToolFolder
from orchestrator.jobs.job import JobArgs
from orchestrator.store.requests import ANONYMOUS
from orchestrator.tools.request_log import CallRecord, Handover, RequestObserver
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import traceparent


def job_args(handover: Handover, folder: ToolFolder | None) -> JobArgs:
    """The job of `handover`'s call, made with `folder` (None: no other process can run it)."""
    call = handover.call
    return JobArgs(
        request_id=call.request_id,
        user_id=call.user_id or ANONYMOUS,
        folder=folder.key if folder is not None else None,
        digest=folder.digest if folder is not None else None,
        arguments=handover.arguments,
        agent_path=handover.agent_path,
        max_retries=handover.max_retries,
        idempotent=call.idempotent,
        trace=traceparent(),  # the handing-over call's span, which the job's links to
    )


def bare_args(call: CallRecord) -> JobArgs:
    """The job of a call known only by its record: it runs where it is, and nowhere else."""
    return JobArgs(request_id=call.request_id, user_id=call.user_id or ANONYMOUS)


async def record_when_done(
    work: asyncio.Task[ToolResult], call: CallRecord, observer: RequestObserver | None
) -> None:
    """Record how `work` (the call running here) ended, once it does."""
    try:
        result = await work
    except asyncio.CancelledError:
        if observer is not None:
            await observer.cancelled(call)
        return
    if observer is not None:
        await observer.finished(call, result)
