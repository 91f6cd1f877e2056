"""Background tool calls: they run on after their turn, and report into their session when done.

A call goes to the background when its tool says `background: true`, or when
it outlives the inline budget: it becomes a job. The model is told at once (a
status message with the job id) and answers the user; when the job ends, its
session gets the result and the model a turn to report it. ("Task" is kept for
a plan's tasks and the to-do agent's rows.)

`JobBoard` is what a session and the chat need of whoever runs them: here,
`LocalJobs` runs them in this process (a conversation kept in memory, a
library user's runtime); `orchestrator.jobs.JobRunner` puts them on the job
queue in the database, for workers anywhere (the `chat` and `ask` commands).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from orchestrator.errors import ToolError
from orchestrator.redact import redact
from orchestrator.tools.request_log import BackgroundRunner, CallRecord, Handover, RequestObserver
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)

JobStatus = Literal["running", "completed", "failed", "cancelled"]


@dataclass
class BackgroundJob:
    """One background call; its id is the call's request id.

    `work` is its run in this process (None for a job that runs, or ran, on a
    worker); `where` says where it runs, for the person (a worker's name);
    `waiting` why a queued one waits, when no worker can take it.
    """

    call: CallRecord
    work: asyncio.Task[ToolResult] | None
    observer: RequestObserver | None = None
    status: JobStatus | Literal["queued"] = "running"
    result: ToolResult | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    where: str | None = None
    waiting: str | None = None

    @property
    def job_id(self) -> str:
        return self.call.request_id

    @property
    def tool(self) -> str:
        return self.call.call_name


Delivery = Callable[[BackgroundJob], Awaitable[None]]
Listener = Callable[[BackgroundJob], None]


class JobBoard(BackgroundRunner, Protocol):
    """Whoever runs a runtime's background calls, as its sessions and the chat see it.

    It takes the calls (`BackgroundRunner`), tells `listeners` of each that
    ends and hands its result to the session's delivery (`deliver_to`): its
    follow-up turn.
    """

    listeners: list[Listener]

    def deliver_to(self, session_id: str, delivery: Delivery, *, user_id: str | None = None) -> None:
        """Where results of the session (of `user_id`)'s jobs go: its follow-up turn."""
        ...

    async def jobs_of(self, session_id: str) -> list[BackgroundJob]:
        """The session's jobs, oldest first, running and ended (for the chat's `/tasks`)."""
        ...

    async def cancel_job(self, job_id: str) -> bool:
        """Cancel a job that has not ended, wherever it runs; False if there is no such job."""
        ...

    async def catch_up(self, session_id: str) -> list[BackgroundJob]:
        """Deliver what ended while no one had the session open; those jobs, told to listeners."""
        ...

    def waiting(self, session_id: str) -> int:
        """How many jobs this process started in the session and has not delivered yet."""
        ...

    async def drain(self, session_id: str | None = None) -> None:
        """Wait until the (session's) jobs this process started have ended and been delivered."""
        ...

    def closing_note(self) -> str | None:
        """What closing does to jobs not ended, for the person (None: nothing to say)."""
        ...

    def cancel_running(self) -> None:
        """Cancel what runs in this process (a Ctrl-C while closing waits for it)."""
        ...

    async def close(self) -> None:
        """What this process runs or started ends, or is left in order (see `closing_note`)."""
        ...


class LocalJobs:
    """The background calls of this process, run here (a `JobBoard`)."""

    def __init__(self) -> None:
        self.jobs: dict[str, BackgroundJob] = {}
        self.listeners: list[Listener] = []
        self._deliveries: dict[str, Delivery] = {}
        self._reports: set[asyncio.Task[None]] = set()

    def adopt(
        self,
        work: asyncio.Task[ToolResult],
        call: CallRecord,
        *,
        observer: RequestObserver | None,
        started_at: datetime | None = None,
        handover: Handover | None = None,
    ) -> BackgroundJob:
        """Take over a running call (begun at `started_at`, else now); it is reported when it ends."""
        job = BackgroundJob(call=call, work=work, observer=observer)
        if started_at is not None:
            job.started_at = started_at
        self.jobs[job.job_id] = job
        # A fresh context: the call was adopted inside a graph run, whose LangGraph
        # context would otherwise make the follow-up turn run as part of that run.
        report = asyncio.get_running_loop().create_task(
            self._report_when_done(job), context=contextvars.Context()
        )
        self._reports.add(report)
        report.add_done_callback(self._reports.discard)
        return job

    async def defer(self, handover: Handover) -> bool:
        """No queue here: a background call starts in this process (and is adopted)."""
        return False

    def deliver_to(self, session_id: str, delivery: Delivery, *, user_id: str | None = None) -> None:
        """Where results of the session's jobs go (the session's follow-up turn)."""
        self._deliveries[session_id] = delivery

    def of_session(self, session_id: str) -> list[BackgroundJob]:
        """The session's jobs, oldest first."""
        return [t for t in self.jobs.values() if t.call.session_id == session_id]

    async def jobs_of(self, session_id: str) -> list[BackgroundJob]:
        """The session's jobs, oldest first (`of_session`)."""
        return self.of_session(session_id)

    async def cancel_job(self, job_id: str) -> bool:
        """Cancel a running job (`cancel`)."""
        return self.cancel(job_id)

    async def catch_up(self, session_id: str) -> list[BackgroundJob]:
        """Nothing ends while the session is closed: its jobs end with this process."""
        return []

    def waiting(self, session_id: str) -> int:
        """How many of the session's jobs still run."""
        return sum(t.status == "running" for t in self.of_session(session_id))

    def cancel_running(self) -> None:
        """Cancel what still runs (closing does anyway)."""
        for job in self.jobs.values():
            if job.status == "running" and job.work is not None:
                job.work.cancel()

    def closing_note(self) -> str | None:
        """Closing cancels what still runs."""
        running = sum(t.status == "running" for t in self.jobs.values())
        return f"cancelling {running} background task(s) still running" if running else None

    def running(self, request_id: str) -> bool:
        """Whether this process runs the call `request_id` in the background."""
        job = self.jobs.get(request_id)
        return job is not None and job.status == "running"

    def cancel(self, job_id: str) -> bool:
        """Cancel a running job; False if there is no such running job."""
        job = self.jobs.get(job_id)
        if job is None or job.status != "running":
            return False
        assert job.work is not None  # every job of this manager runs here
        job.work.cancel()
        return True

    async def drain(self, session_id: str | None = None) -> None:
        """Wait until the (session's) jobs have ended and been reported and delivered."""
        while pending := [
            t.work for t in self.jobs.values()
            if t.work is not None and t.status == "running" and session_id in (None, t.call.session_id)
        ] or list(self._reports):
            await asyncio.wait(pending)

    async def close(self) -> None:
        """Cancel what still runs, and wait until it is recorded as cancelled."""
        for job in self.jobs.values():
            if job.status == "running" and job.work is not None:
                job.work.cancel()
        if self._reports:
            await asyncio.wait(list(self._reports))

    async def _report_when_done(self, job: BackgroundJob) -> None:
        assert job.work is not None  # adopted: it runs here
        try:
            job.result = await job.work
            job.status = "failed" if job.result.status == "failure" else "completed"
        except asyncio.CancelledError:
            job.status = "cancelled"
        except Exception as error:  # the executor returns failures as results; this is a bug
            crashed = redact(f"{job.tool} crashed: {error}")
            job.result = ToolResult.from_error(ToolError(crashed))
            job.status = "failed"
        job.finished_at = datetime.now(UTC)
        try:
            await self._record(job)
            for listener in self.listeners:
                listener(job)
            delivery = self._deliveries.get(job.call.session_id or "")
            if delivery is not None and job.status != "cancelled":
                await delivery(job)
        except Exception as error:  # a report that fails must not take the process down
            logger.warning("reporting background job %s failed: %s", job.job_id, error)

    async def _record(self, job: BackgroundJob) -> None:
        if job.observer is None:
            return
        if job.result is None:
            await job.observer.cancelled(job.call)
        else:
            await job.observer.finished(job.call, job.result)
