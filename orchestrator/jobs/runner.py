"""What `chat` and `ask` hand background calls to: the job queue, a worker of their own, results.

A `JobRunner` is the runtime's `JobBoard` (see `conversation.job_board`) when the runtime has
storage. A call of a folder's tool that says `background: true` is queued as a
job (`defer`), for whichever worker holds its folder's content, this process's
own included (unless ORCHESTRATOR_EMBEDDED_WORKER=0); any other background call
(one that outlived its inline budget, an MCP server's) goes on where it runs,
as a job this process holds (`adopt`). Results come back through the
database (`delivery`), here or in any process that has the session open.

The queue, the worker and procrastinate itself are loaded on first use: a
command that makes no job never pays for them.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING

from sqlalchemy import text

from orchestrator.conversation.job_board import BackgroundJob, Delivery, Listener
from orchestrator.folders.discovery import ToolFolder
from orchestrator.jobs.delivery import Deliveries
from orchestrator.jobs.handover import bare_args, job_args, record_when_done
from orchestrator.jobs.job import content_queue
from orchestrator.jobs.trust import approval_of, record, record_local_decisions, tool_folders
from orchestrator.jobs.views import WAITING_HERE, settled_line, task_of
from orchestrator.jobs.waiting import why_waiting
from orchestrator.runtime import Orchestrator
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.queue_schema import SCHEMA
from orchestrator.store.requests import ANONYMOUS, OWNER, has_stopped
from orchestrator.tools.request_log import CallRecord, Handover, RequestObserver
from orchestrator.tools.request_status import RequestStatus
from orchestrator.tools.results import ToolResult

if TYPE_CHECKING:
    from datetime import datetime

    from orchestrator.jobs.queue import JobQueue
    from orchestrator.jobs.stalled import Settled
    from orchestrator.jobs.worker import JobWorker

logger = logging.getLogger(__name__)

# Work for a worker of this process, asked at a session's start without loading the queue
# (procrastinate) unless there is some: jobs waiting in the queues of its contents, and running
# jobs whose worker is silent, or (its owner: on this machine, maybe gone) to look at.
WORK = text(
    f"""SELECT NULL AS owner, true AS silent WHERE EXISTS (
            SELECT 1 FROM {SCHEMA}.procrastinate_jobs
            WHERE status = 'todo' AND queue_name = ANY(CAST(:queues AS text[])))
        UNION ALL
        SELECT p.owner, (w.id IS NULL OR w.last_heartbeat < now() - make_interval(secs => :seconds))
        FROM {SCHEMA}.procrastinate_jobs j
        LEFT JOIN {SCHEMA}.procrastinate_workers w ON w.id = j.worker_id
        LEFT JOIN {SCHEMA}.worker_processes p ON p.worker_id = j.worker_id
        WHERE j.status = 'doing'"""
)
HANDED = "{name} ({request_id}) outlived its inline budget: handed to a worker, which runs it again"
HELD_HERE = (
    "{name} ({request_id}) outlived its inline budget and cannot go to a worker ({why}): "
    "this process runs it to its end"
)
QUEUE_AWAY = "the job queue could not take it"
GO_ON = (
    "{count} background job(s) go on in workers: their results report into session "
    "{session_id} when it is next opened"
)
STILL_QUEUED = f"""
    SELECT DISTINCT queue_name FROM {SCHEMA}.procrastinate_jobs
    WHERE status = 'todo' AND args ->> 'request_id' = ANY(%(ids)s::text[])
"""
class JobRunner:
    """The job queue as one process's runtime sees it (a `JobBoard`; see the module)."""

    def __init__(
        self,
        runtime: Orchestrator,
        *,
        takes_jobs: bool,
        spawn_for_left: bool = False,
        hand_over: bool = False,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        """`on_note` is told, in a line, what became of the jobs of workers that stopped.

        `hand_over` (`ask --no-wait`): this process does not wait for its background calls
        or deliver their results; a call that outlives its inline budget goes to a worker
        where it safely can, or `on_note` says why it runs on here.
        """
        storage = runtime.storage
        if storage is None:
            raise ValueError("background jobs need the runtime's storage: they are in the database")
        self.runtime = runtime
        self.storage = storage
        self.takes_jobs = takes_jobs
        self.spawn_for_left = spawn_for_left
        self.hand_over = hand_over
        self.on_note = on_note
        self.listeners: list[Listener] = []
        self.deliveries = Deliveries(storage.database, listeners=self.listeners)
        self.jobs = JobRequests(storage.database)
        self._folders = tool_folders(runtime)
        self._users: dict[str, str] = {}  # session -> its user
        self._started: dict[str, str] = {}  # request id -> session, of the jobs made here
        self._holding: dict[str, asyncio.Task[None]] = {}  # request id -> making its held job
        self._adopted: dict[str, asyncio.Task[ToolResult]] = {}  # request id -> its run here, till it ends
        self._opening: asyncio.Lock | None = None
        self._queue: JobQueue | None = None
        self._worker: JobWorker | None = None
        self._recorded = False
        self._approved: set[tuple[str, str]] = set()  # folder contents recorded as approved

    # -- what the dispatch pipeline hands over (BackgroundRunner)

    async def defer(self, handover: Handover) -> bool:
        """Queue a folder tool's call for the workers of its content; False for any other, or
        when the queue cannot take it (then it runs here, as a call past its budget does)."""
        folder = self._folder(handover.tool)
        if folder is None:
            return False
        call = handover.call
        try:
            queue, _ = await self._ready()
            if (folder.key, folder.digest) not in self._approved:  # workers elsewhere check it
                await record(self.storage.database, [approval_of(folder)])
                self._approved.add((folder.key, folder.digest))
            job_id = await queue.defer(job_args(handover, folder))
        except Exception as error:  # not queued: it must not be lost, so it runs here
            logger.warning("queueing %s failed: %s: %s", call.request_id, type(error).__name__, error)
            return False
        self._expect(call)
        try:  # queued: whatever fails from here, a worker runs it
            await self.jobs.queued(call, job_id=job_id)
            if not self.hand_over:
                await self.deliveries.listen()  # its result comes back through the database
        except Exception as error:
            logger.warning("recording job %s failed: %s: %s", job_id, type(error).__name__, error)
        return True

    def adopt(
        self,
        work: asyncio.Task[ToolResult],
        call: CallRecord,
        *,
        observer: RequestObserver | None,
        started_at: datetime | None = None,
        handover: Handover | None = None,
    ) -> asyncio.Task[None]:
        """Go on with `work` here, as a job this process holds (heartbeats, cancellation);
        or, handing over, as a job for a worker, when its tool is one a worker runs again safely."""
        self._expect(call)
        if self.hand_over and handover is not None:
            if (why := self._not_handed_over(handover)) is None:
                return self._task(self._hand_over(work, call, observer, handover), call)
            self._note(HELD_HERE.format(name=call.call_name, request_id=call.request_id, why=why))
        self._runs_here(work, call)
        return self._task(self._hold(work, call, observer, handover), call)

    def _runs_here(self, work: asyncio.Task[ToolResult], call: CallRecord) -> None:
        """`work` runs to its end in this process (closing waits for it)."""
        self._adopted[call.request_id] = work
        work.add_done_callback(lambda _: self._adopted.pop(call.request_id, None))

    def _task(self, coroutine: Coroutine[object, object, None], call: CallRecord) -> asyncio.Task[None]:
        # A fresh context: the call was adopted inside a graph run, which it outlives.
        holding = asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())
        self._holding[call.request_id] = holding
        holding.add_done_callback(lambda _: self._holding.pop(call.request_id, None))
        return holding

    def _not_handed_over(self, handover: Handover) -> str | None:
        """Why a call running here cannot go to a worker instead (None: it can)."""
        if self._folder(handover.tool) is None:
            return "no worker has its tool (it is not a tool folder's)"
        if not handover.call.idempotent:
            return "its folder does not say `idempotent: true`, and a worker would run it again"
        return None

    async def _hand_over(
        self,
        work: asyncio.Task[ToolResult],
        call: CallRecord,
        observer: RequestObserver | None,
        handover: Handover,
    ) -> None:
        """Queue the call for a worker, which runs it again (it is idempotent); stop it here."""
        if not await self.defer(handover):  # the queue is away: it runs on here
            self._note(HELD_HERE.format(name=call.call_name, request_id=call.request_id, why=QUEUE_AWAY))
            self._runs_here(work, call)
            await self._hold(work, call, observer, handover)
            return
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        self._note(HANDED.format(name=call.call_name, request_id=call.request_id))

    def _say_where_results_go(self) -> None:
        """Of each session, the background calls left to workers: where their results go."""
        left: dict[str, int] = {}
        for request_id, session_id in self._started.items():
            if request_id not in self._adopted:  # not run to its end here
                left[session_id] = left.get(session_id, 0) + 1
        for session_id, count in left.items():
            self._note(GO_ON.format(count=count, session_id=session_id))

    def _note(self, line: str) -> None:
        if self.on_note is not None:
            self.on_note(line)

    def running(self, request_id: str) -> bool:
        """Whether this process runs the call `request_id` (a job it holds)."""
        if request_id in self._holding:
            return True
        return self._worker is not None and self._worker.holds(request_id)

    # -- what sessions and the chat ask of it (JobBoard)

    def deliver_to(self, session_id: str, delivery: Delivery, *, user_id: str | None = None) -> None:
        """Hand the session's results to `delivery` (its follow-up turn) while it is open here."""
        user = user_id or ANONYMOUS
        self._users[session_id] = user
        self.deliveries.watch(session_id, user_id=user, delivery=delivery)

    async def jobs_of(self, session_id: str) -> list[BackgroundJob]:
        """The session's background calls, as the request log holds them (any process's)."""
        user = self._users.get(session_id, ANONYMOUS)
        calls = await self.jobs.background_calls(user_id=user, session_id=session_id)
        queued = [c.job_id for c in calls if c.status == RequestStatus.QUEUED and c.job_id is not None]
        seconds = self.runtime.settings.worker_stalled_seconds
        waiting = await why_waiting(self.storage.database, queued, seconds=seconds)
        return [task_of(call, user_id=user, waiting=waiting.get(call.job_id or 0)) for call in calls]

    async def cancel_job(self, job_id: str) -> bool:
        """Cancel the job `job_id` wherever it is: queued, at once; running, by its worker.

        Only a job of a user whose session is open here (row-level security says whose).
        """
        if not await self._theirs(job_id):
            return False
        queue = await self._open_queue()
        outcome = await queue.cancel(job_id)
        if outcome == "cancelled":  # no worker had it: the log says so here
            job = await queue.job_of(job_id)
            user = job.args.user_id if job is not None else ANONYMOUS
            held = await self.jobs.load(job_id, user_id=user)
            if held is not None:
                await self.storage.requests.cancelled(held.call)
        return outcome is not None

    async def _theirs(self, task_id: str) -> bool:
        """Whether `task_id` is a background call of a user whose session is open here."""
        for user in set(self._users.values()):
            found = await self.jobs.background_calls(user_id=user, request_id=task_id)
            if any(call.request_id == task_id for call in found):
                return True
        return False

    async def catch_up(self, session_id: str) -> list[BackgroundJob]:
        """What ended while no one had the session open, now claimed here to deliver.

        First, a worker of this process starts if there is work for it: jobs
        it could run wait, or a stopped worker left jobs (settled as it starts:
        run again, or failed and so reported here).
        """
        user = self._users.get(session_id, ANONYMOUS)
        self.deliveries.watch(session_id, user_id=user)
        if self._worker is None and await self._work_for_us():
            await self._ready()
        return await self.deliveries.catch_up(session_id, user_id=user)

    def waiting(self, session_id: str) -> int:
        """How many jobs this process made in the session have not reached it yet."""
        return len(self.deliveries.expected(session_id))

    async def drain(self, session_id: str | None = None) -> None:
        """Wait until the jobs this process made (in the session) have ended and been delivered."""
        if self._holding:
            await asyncio.wait(list(self._holding.values()))
        ids = [rid for rid, sid in self._started.items() if session_id in (None, sid)]
        if ids:
            await self.deliveries.listen()
            for sid in {self._started[rid] for rid in ids}:
                await self.deliveries.deliver(sid)  # what ended before the listening began
            await self.deliveries.wait(ids)

    def closing_note(self) -> str | None:
        """What closing waits for: the jobs running in this process."""
        taken = self._worker.taken if self._worker is not None else 0
        running = taken + len(self._adopted)  # adopted: held as a job, or about to be
        return WAITING_HERE.format(count=running) if running else None

    def cancel_running(self) -> None:
        """Cancel every job running in this process (Ctrl-C while closing waits for them)."""
        if self._worker is not None:
            self._worker.cancel_running()

    async def close(self) -> None:
        """Wait for the jobs running here, leave the queue; start a worker for what is left.

        Results stop coming into the sessions first: one that ends while this
        waits is reported when its session is next opened.
        """
        await self.deliveries.close()
        if self._holding:
            await asyncio.wait(list(self._holding.values()))
        if self.hand_over:
            self._say_where_results_go()
        if self._worker is not None:
            await self._worker.stop()
        if self._queue is not None:
            try:
                await self._leave_no_job_behind()
            finally:
                await self._queue.close()

    # -- the queue and the worker, on first use

    async def _open_queue(self) -> JobQueue:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._queue is None:
                from orchestrator.jobs.queue import JobQueue

                queue = JobQueue(self.storage.database)
                await queue.open()
                self._queue = queue
        return self._queue

    async def _ready(self) -> tuple[JobQueue, JobWorker]:
        """The queue and this process's worker, started (once)."""
        queue = await self._open_queue()
        assert self._opening is not None
        async with self._opening:
            if self._worker is None:
                self._worker = await self._start_worker(queue)
        return queue, self._worker

    async def _start_worker(self, queue: JobQueue) -> JobWorker:
        from orchestrator.jobs.execute import JobExecutor
        from orchestrator.jobs.worker import JobWorker

        if not self._recorded:  # your decisions, revocations too, for the workers to check
            self._recorded = True
            await record_local_decisions(self.storage.database, self.runtime.settings)
        executor = None
        if self.takes_jobs:
            found = {folder.key: folder.digest for folder in self._folders.values()}
            executor = JobExecutor(self.runtime, found=found, name=OWNER)
        worker = JobWorker(
            queue,
            self.storage.requests,
            settings=self.runtime.settings,
            executor=executor,
            queues=self._content_queues(),
            on_settled=self._settled,
        )
        await worker.start()
        return worker

    def _settled(self, settled: list[Settled]) -> None:
        """Jobs of stopped workers: told; one of an open session run again is waited for as ours."""
        for done in settled:
            call = done.call
            if call is None or call.session_id not in self._users:
                continue
            self._note(settled_line(done))
            if done.outcome == "requeued":
                self._expect(call)

    async def _hold(
        self,
        work: asyncio.Task[ToolResult],
        call: CallRecord,
        observer: RequestObserver | None,
        handover: Handover | None,
    ) -> None:
        try:
            _, worker = await self._ready()
            folder = self._folder(handover.tool) if handover is not None else None
            args = job_args(handover, folder) if handover is not None else bare_args(call)
            job_id = await worker.hold(args, work, call, observer=observer)
            await self.jobs.held(call, job_id=job_id)
            if not self.hand_over:
                await self.deliveries.listen()
        except Exception as error:  # the queue is away: the call still runs here, as before
            logger.warning("holding %s as a job failed: %s: %s", call.request_id, type(error).__name__, error)
            await record_when_done(work, call, observer)

    def _folder(self, tool: object) -> ToolFolder | None:
        if id(tool) not in self._folders:  # a deferred folder's real tool, imported since
            self._folders = tool_folders(self.runtime)
        folder = self._folders.get(id(tool))
        return folder if folder is not None and folder.config.mcp is None else None

    def _content_queues(self) -> list[str]:
        return sorted({content_queue(f.digest) for f in self._folders.values() if f.config.mcp is None})

    async def _work_for_us(self) -> bool:
        queues = self._content_queues() if self.takes_jobs else []
        seconds = self.runtime.settings.worker_stalled_seconds
        async with self.storage.database.admin_transaction() as connection:
            rows = (await connection.execute(WORK, {"queues": queues, "seconds": seconds})).all()
        return any(has_stopped(row.owner, silent=row.silent) for row in rows)

    def _expect(self, call: CallRecord) -> None:
        session = call.session_id or ""
        self._started[call.request_id] = session
        self.deliveries.expect(call.request_id, session_id=session)

    async def _leave_no_job_behind(self) -> None:
        """Start a worker for the jobs made here that still wait, if no other process takes them."""
        if not self.spawn_for_left or self._queue is None or not self._started:
            return
        from orchestrator.jobs.spawn import start_worker_later
        from orchestrator.jobs.worker import takers_elsewhere

        rows = await self._queue.query(STILL_QUEUED, ids=list(self._started))
        queues = [str(row["queue_name"]) for row in rows]
        seconds = self.runtime.settings.worker_stalled_seconds
        if queues and not await takers_elsewhere(self._queue, queues, seconds=seconds):
            start_worker_later(self.runtime.settings)
