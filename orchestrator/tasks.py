"""Background tool calls: they run on after their turn, and report into their session when done.

A call goes to the background when its tool says `background: true`, or when
it outlives the inline budget. The model is told at once (a status message
with the task id) and answers the user; when the task ends, its session gets
the result and the model a turn to report it.

`TaskBoard` is what a session and the chat need of whoever runs them: here,
`TaskManager` runs them in this process (a conversation kept in memory, a
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

TaskStatus = Literal["running", "completed", "failed", "cancelled"]


@dataclass
class BackgroundTask:
    """One background call; its id is the call's request id.

    `work` is its run in this process (None for a job that runs, or ran, on a
    worker); `where` says where it runs, for the person (a worker's name).
    """

    call: CallRecord
    work: asyncio.Task[ToolResult] | None
    observer: RequestObserver | None = None
    status: TaskStatus | Literal["queued"] = "running"
    result: ToolResult | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    where: str | None = None

    @property
    def task_id(self) -> str:
        return self.call.request_id

    @property
    def tool(self) -> str:
        return self.call.call_name


Delivery = Callable[[BackgroundTask], Awaitable[None]]
Listener = Callable[[BackgroundTask], None]


class TaskBoard(BackgroundRunner, Protocol):
    """Whoever runs a runtime's background calls, as its sessions and the chat see it.

    It takes the calls (`BackgroundRunner`), tells `listeners` of each that
    ends and hands its result to the session's delivery (`deliver_to`): its
    follow-up turn.
    """

    listeners: list[Listener]

    def deliver_to(self, session_id: str, delivery: Delivery, *, user_id: str | None = None) -> None:
        """Where results of the session (of `user_id`)'s tasks go: its follow-up turn."""
        ...

    async def tasks_of(self, session_id: str) -> list[BackgroundTask]:
        """The session's tasks, oldest first, running and ended (for `/tasks`)."""
        ...

    async def cancel_task(self, task_id: str) -> bool:
        """Cancel a task that has not ended, wherever it runs; False if there is no such task."""
        ...

    async def catch_up(self, session_id: str) -> list[BackgroundTask]:
        """Deliver what ended while no one had the session open; those tasks, told to listeners."""
        ...

    def waiting(self, session_id: str) -> int:
        """How many tasks this process started in the session and has not delivered yet."""
        ...

    async def drain(self, session_id: str | None = None) -> None:
        """Wait until the (session's) tasks this process started have ended and been delivered."""
        ...

    def closing_note(self) -> str | None:
        """What closing does to tasks not ended, for the person (None: nothing to say)."""
        ...

    def cancel_running(self) -> None:
        """Cancel what runs in this process (a Ctrl-C while closing waits for it)."""
        ...

    async def close(self) -> None:
        """What this process runs or started ends, or is left in order (see `closing_note`)."""
        ...


class TaskManager:
    """The background calls of this process, run here (a `TaskBoard`)."""

    def __init__(self) -> None:
        self.tasks: dict[str, BackgroundTask] = {}
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
    ) -> BackgroundTask:
        """Take over a running call (begun at `started_at`, else now); it is reported when it ends."""
        task = BackgroundTask(call=call, work=work, observer=observer)
        if started_at is not None:
            task.started_at = started_at
        self.tasks[task.task_id] = task
        # A fresh context: the call was adopted inside a graph run, whose LangGraph
        # context would otherwise make the follow-up turn run as part of that run.
        report = asyncio.get_running_loop().create_task(
            self._report_when_done(task), context=contextvars.Context()
        )
        self._reports.add(report)
        report.add_done_callback(self._reports.discard)
        return task

    async def defer(self, handover: Handover) -> bool:
        """No queue here: a background call starts in this process (and is adopted)."""
        return False

    def deliver_to(self, session_id: str, delivery: Delivery, *, user_id: str | None = None) -> None:
        """Where results of the session's tasks go (the session's follow-up turn)."""
        self._deliveries[session_id] = delivery

    def of_session(self, session_id: str) -> list[BackgroundTask]:
        """The session's tasks, oldest first."""
        return [t for t in self.tasks.values() if t.call.session_id == session_id]

    async def tasks_of(self, session_id: str) -> list[BackgroundTask]:
        """The session's tasks, oldest first (`of_session`)."""
        return self.of_session(session_id)

    async def cancel_task(self, task_id: str) -> bool:
        """Cancel a running task (`cancel`)."""
        return self.cancel(task_id)

    async def catch_up(self, session_id: str) -> list[BackgroundTask]:
        """Nothing ends while the session is closed: its tasks end with this process."""
        return []

    def waiting(self, session_id: str) -> int:
        """How many of the session's tasks still run."""
        return sum(t.status == "running" for t in self.of_session(session_id))

    def cancel_running(self) -> None:
        """Cancel what still runs (closing does anyway)."""
        for task in self.tasks.values():
            if task.status == "running" and task.work is not None:
                task.work.cancel()

    def closing_note(self) -> str | None:
        """Closing cancels what still runs."""
        running = sum(t.status == "running" for t in self.tasks.values())
        return f"cancelling {running} background task(s) still running" if running else None

    def running(self, request_id: str) -> bool:
        """Whether this process runs the call `request_id` in the background."""
        task = self.tasks.get(request_id)
        return task is not None and task.status == "running"

    def cancel(self, task_id: str) -> bool:
        """Cancel a running task; False if there is no such running task."""
        task = self.tasks.get(task_id)
        if task is None or task.status != "running":
            return False
        assert task.work is not None  # every task of this manager runs here
        task.work.cancel()
        return True

    async def drain(self, session_id: str | None = None) -> None:
        """Wait until the (session's) tasks have ended and been reported and delivered."""
        while pending := [
            t.work for t in self.tasks.values()
            if t.work is not None and t.status == "running" and session_id in (None, t.call.session_id)
        ] or list(self._reports):
            await asyncio.wait(pending)

    async def close(self) -> None:
        """Cancel what still runs, and wait until it is recorded as cancelled."""
        for task in self.tasks.values():
            if task.status == "running" and task.work is not None:
                task.work.cancel()
        if self._reports:
            await asyncio.wait(list(self._reports))

    async def _report_when_done(self, task: BackgroundTask) -> None:
        assert task.work is not None  # adopted: it runs here
        try:
            task.result = await task.work
            task.status = "failed" if task.result.status == "failure" else "completed"
        except asyncio.CancelledError:
            task.status = "cancelled"
        except Exception as error:  # the executor returns failures as results; this is a bug
            crashed = redact(f"{task.tool} crashed: {error}")
            task.result = ToolResult.from_error(ToolError(crashed))
            task.status = "failed"
        task.finished_at = datetime.now(UTC)
        try:
            await self._record(task)
            for listener in self.listeners:
                listener(task)
            delivery = self._deliveries.get(task.call.session_id or "")
            if delivery is not None and task.status != "cancelled":
                await delivery(task)
        except Exception as error:  # a report that fails must not take the process down
            logger.warning("reporting background task %s failed: %s", task.task_id, error)

    async def _record(self, task: BackgroundTask) -> None:
        if task.observer is None:
            return
        if task.result is None:
            await task.observer.cancelled(task.call)
        else:
            await task.observer.finished(task.call, task.result)
