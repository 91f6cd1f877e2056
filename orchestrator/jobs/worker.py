"""A worker in this process: procrastinate's, registered with the process behind it.

It takes jobs from the queues of the folder contents it loaded and runs them
(`execute.JobExecutor`), as many at once as its concurrency allows, when it
has an executor; without one (`ORCHESTRATOR_EMBEDDED_WORKER=0`, `ask
--no-wait`) it takes none, and only holds the calls its own process moved to
the background (`hold`). Either way
it says it is alive (heartbeats), listens for cancellations of what it runs,
and settles the jobs of workers that stopped (see `stalled`).

Stopping it waits for what it runs to end: a job is never cut short by an
orderly stop. A process killed meanwhile leaves its jobs to the other workers.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime

from procrastinate.connector import BaseAsyncConnector
from procrastinate.jobs import Job, Status
from procrastinate.manager import JobManager
from procrastinate.worker import Worker

from orchestrator.errors import ToolError
from orchestrator.folders.discovery import ToolFolder
from orchestrator.jobs.job import content_queue
from orchestrator.jobs.queue import EXECUTOR, HELD, Executor, GiveBack, JobArgs, JobQueue
from orchestrator.jobs.spool import KeepingLog, ResultSpool
from orchestrator.jobs.stalled import Settled, settle_stalled
from orchestrator.redact import redact
from orchestrator.settings import Settings
from orchestrator.store.engine import database_problem
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.queue_schema import SCHEMA
from orchestrator.store.requests import OWNER, RequestLog, is_alive
from orchestrator.tools.request_log import CallRecord, RequestObserver
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)

PRESENCE_SQL = f"""
    INSERT INTO {SCHEMA}.worker_processes (worker_id, owner, queues, concurrency)
    VALUES (%(worker_id)s, %(owner)s, %(queues)s, %(concurrency)s)
"""
HOLDING_SQL = f"UPDATE {SCHEMA}.worker_processes SET queues = %(queues)s WHERE worker_id = %(worker_id)s"
# A job given back (see `GiveBack`) is queued again as it was (not counted as an attempt), and
# announced as a new one so that a worker holding its content takes it at once.
GIVE_BACK_SQL = f"""
    WITH back AS (
        UPDATE {SCHEMA}.procrastinate_jobs SET status = 'todo', scheduled_at = now(), worker_id = NULL
        WHERE id = %(job_id)s AND status = 'doing' AND NOT abort_requested
        RETURNING id, queue_name
    )
    SELECT pg_notify('procrastinate_queue_v1#' || queue_name,
        json_build_object('type', 'job_inserted', 'job_id', id)::text) FROM back
"""
WAITING_SQL = f"""
    SELECT EXISTS (
        SELECT 1 FROM {SCHEMA}.procrastinate_jobs
        WHERE status = 'todo' AND queue_name = ANY(%(queues)s::text[])
    ) AS waiting
"""
# The live workers that take jobs from one of `queues`, with their processes.
TAKERS_SQL = f"""
    SELECT p.owner FROM {SCHEMA}.worker_processes p
    JOIN {SCHEMA}.procrastinate_workers w ON w.id = p.worker_id
    WHERE p.queues && %(queues)s::text[]
        AND w.last_heartbeat > now() - make_interval(secs => %(seconds)s)
"""
FETCH_POLL_SECONDS = 5.0  # a worker that takes jobs looks for them this often, besides NOTIFY
HELD_ONLY_POLL_SECONDS = 24 * 3600.0  # one that takes none has nothing to look for
ABORTS = f"procrastinate_queue_v1#{HELD}"  # the channel of cancellations of held jobs
OnSettled = Callable[[list[Settled]], None]
OnStale = Callable[[list[ToolFolder]], None]


class _Registering(JobManager):
    """procrastinate's job manager, which also records the process behind each worker it registers."""

    def __init__(
        self,
        connector: BaseAsyncConnector,
        *,
        queues: list[str],
        concurrency: int,
        holding: Callable[[], Awaitable[list[str]]] | None = None,
        given_back: set[int] | None = None,
        cancelled: Callable[[Job], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(connector)
        self.queues = queues
        self.concurrency = concurrency
        self.holding = holding
        self.given_back = given_back if given_back is not None else set()
        self.cancelled = cancelled
        self.registered: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.before_leaving: Callable[[], Awaitable[None]] | None = None

    async def fetch_job(self, queues: Iterable[str] | None, worker_id: int) -> Job | None:
        # Only from the queues of the contents it still holds: a copy changed since it
        # loaded it leaves that content's jobs to the workers that hold it.
        if self.holding is not None:
            queues = await self.holding()
            if not queues:
                return None
        return await super().fetch_job(queues, worker_id)

    async def retry_job(
        self,
        job: Job,
        retry_at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        lock: str | None = None,
    ) -> None:
        if job.id is not None and job.id in self.given_back:
            self.given_back.discard(job.id)
            if await self.connector.execute_query_all_async(GIVE_BACK_SQL, job_id=job.id):
                return
            # Cancelled meanwhile (nothing of it ran): it ends cancelled, in the request log too.
            await self.finish_job_by_id_async(job.id, Status.ABORTED, delete_job=False)
            if self.cancelled is not None:
                await self.cancelled(job)
            return
        await super().retry_job(job, retry_at, priority, queue, lock)

    async def register_worker(self) -> int:
        worker_id = await super().register_worker()
        await self.connector.execute_query_async(
            PRESENCE_SQL,
            worker_id=worker_id,
            owner=OWNER,
            queues=self.queues,
            concurrency=self.concurrency,
        )
        if not self.registered.done():
            self.registered.set_result(worker_id)
        return worker_id

    async def unregister_worker(self, worker_id: int) -> None:
        # procrastinate leaves once the jobs it took ended; the calls this process holds as
        # jobs must end first too, or other workers would find them without a worker.
        if self.before_leaving is not None:
            await self.before_leaving()
        await super().unregister_worker(worker_id)


@dataclass
class _Held:
    """A call this process runs itself, as a job of the `held` queue."""

    job_id: int
    work: asyncio.Task[ToolResult]
    call: CallRecord
    watcher: asyncio.Task[None] | None = None


class _Counting:
    """The executor, keeping the tasks of the jobs it runs now."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.tasks: set[asyncio.Task[object]] = set()
        self.given_back: set[int] = set()  # the queue's ids of the jobs it gave back

    @property
    def running(self) -> int:
        return len(self.tasks)

    async def run(self, args: JobArgs, *, job_id: int) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            await self.executor.run(args, job_id=job_id)
        except GiveBack:
            self.given_back.add(job_id)
            raise
        finally:
            self.tasks.discard(task)


class JobWorker:
    """One worker of this process (see the module's docstring)."""

    def __init__(
        self,
        queue: JobQueue,
        log: RequestLog,
        *,
        settings: Settings,
        executor: Executor | None = None,
        queues: list[str] | None = None,
        concurrency: int | None = None,
        on_settled: OnSettled | None = None,
        on_stale: OnStale | None = None,
    ) -> None:
        self.queue = queue
        self.log = log
        self.settings = settings
        self.executor = _Counting(executor) if executor is not None else None
        self.queues = sorted(set(queues or ())) if executor is not None else []
        self.concurrency = concurrency or settings.worker_concurrency
        self.on_settled = on_settled
        self.on_stale = on_stale
        self.holding = list(self.queues)  # the queues of the contents it still holds
        self._stale: set[tuple[str, str]] = set()  # (key, digest) of the copies changed since loaded
        self.worker_id: int | None = None
        self._worker: Worker | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._held: dict[int, _Held] = {}
        self._listening: asyncio.Task[None] | None = None

    @property
    def takes_jobs(self) -> bool:
        return bool(self.queues)

    @property
    def taken(self) -> int:
        """The jobs of the queue this process runs now (not those it holds)."""
        return self.executor.running if self.executor is not None else 0

    @property
    def running(self) -> int:
        """The jobs this process runs now: those it took, and those it holds."""
        return self.taken + sum(not held.work.done() for held in self._held.values())

    @property
    def stopped(self) -> bool:
        """Whether procrastinate's worker stopped by itself (its database went away, say)."""
        return bool(self._tasks) and self._tasks[0].done()

    async def until_stopped(self, timeout: float | None) -> bool:
        """Wait at most `timeout` seconds for it to stop by itself; whether it did."""
        if not self._tasks:
            return False
        done, _ = await asyncio.wait({self._tasks[0]}, timeout=timeout)
        return bool(done)

    def holds(self, request_id: str) -> bool:
        """Whether this process runs the call `request_id` itself, and it has not ended."""
        return any(h.call.request_id == request_id and not h.work.done() for h in self._held.values())

    async def start(self) -> int:
        """Register and start taking jobs (if it does); its worker id, once registered."""
        manager = _Registering(
            self.queue.connector,
            queues=self.queues,
            concurrency=self.concurrency,
            holding=self._holding if self.executor is not None else None,
            given_back=self.executor.given_back if self.executor is not None else None,
            cancelled=self._cancelled_before_start,
        )
        manager.before_leaving = self._held_ended
        self.queue.app.job_manager = manager
        self._worker = Worker(
            self.queue.app,
            queues=self.queues or [HELD],  # held jobs are never waiting: it takes none
            name=OWNER,
            concurrency=self.concurrency,
            fetch_job_polling_interval=FETCH_POLL_SECONDS if self.takes_jobs else HELD_ONLY_POLL_SECONDS,
            listen_notify=self.takes_jobs,
            shutdown_graceful_timeout=None,  # an orderly stop waits for what runs
            additional_context={EXECUTOR: self.executor},
            install_signal_handlers=False,  # the command handles signals
            update_heartbeat_interval=self.settings.worker_heartbeat_seconds,
            stalled_worker_timeout=self.settings.worker_stalled_seconds,
        )
        running = _task(self._worker.run(), name="job worker")
        done, _ = await asyncio.wait({running, manager.registered}, return_when=asyncio.FIRST_COMPLETED)
        if running in done:  # it could not even register: say why
            running.result()
            raise RuntimeError("the job worker stopped before it registered")
        self.worker_id = manager.registered.result()
        await self._record_kept()  # first: a job whose result was kept has ended, not stalled
        await self._settle_logged()  # at once: what stopped workers left is known before any wait
        self._tasks = [running, _task(self._watch_stalled(), name="stalled jobs")]
        return self.worker_id

    async def _cancelled_before_start(self, job: Job) -> None:
        """Record as cancelled the call of a job cancelled while it was being given back."""
        args = JobArgs.of(job.task_kwargs)
        held = await JobRequests(self.queue.database).load(args.request_id, user_id=args.user_id)
        if held is not None:
            await self.log.cancelled(held.call)

    async def _holding(self) -> list[str]:
        """The queues of the contents it loaded that its copies still have; a change is recorded
        in its row of `worker_processes` (what `jobs list` reads) and told (`on_stale`)."""
        assert self.executor is not None
        stale = await self.executor.executor.stale()
        gone = {content_queue(folder.digest) for folder in stale}
        holding = [name for name in self.queues if name not in gone]
        if holding != self.holding and self.worker_id is not None:
            await self.queue.execute(HOLDING_SQL, queues=holding, worker_id=self.worker_id)
            self.holding = holding
        newly = [f for f in stale if (f.key, f.digest) not in self._stale]
        self._stale = {(f.key, f.digest) for f in stale}
        if newly and self.on_stale is not None:
            self.on_stale(newly)
        return holding

    async def settle_stalled(self) -> list[Settled]:
        """Settle the jobs of stopped workers now (as each heartbeat does)."""
        settled = await settle_stalled(
            self.queue, self.log, seconds=self.settings.worker_stalled_seconds
        )
        if settled and self.on_settled is not None:
            self.on_settled(settled)
        return settled

    async def waiting_jobs(self) -> bool:
        """Whether jobs wait in the queues this worker takes jobs from."""
        rows = await self.queue.query(WAITING_SQL, queues=self.holding)
        return bool(rows[0]["waiting"])

    async def hold(
        self,
        args: JobArgs,
        work: asyncio.Task[ToolResult],
        call: CallRecord,
        *,
        observer: RequestObserver | None,
    ) -> int:
        """Make `work` (a call running here) a job of this worker; its job id.

        It is recorded in the request log when it ends, and its job finished;
        a cancellation from anywhere (`jobs cancel`) reaches it.
        """
        assert self.worker_id is not None, "start the worker first"
        job_id = await self.queue.hold(args, worker_id=self.worker_id)
        held = _Held(job_id, work, call)
        self._held[job_id] = held
        held.watcher = _task(self._until_done(held, observer), name=f"held job {job_id}")
        if self._listening is None:
            self._listening = _task(self._listen_for_aborts(), name="held job cancellations")
        return job_id

    def cancel_running(self) -> None:
        """Cancel every job this process runs (each is recorded as cancelled)."""
        for held in self._held.values():
            held.work.cancel()
        if self.executor is not None:
            for task in self.executor.tasks:
                task.cancel()

    async def stop(self) -> None:
        """Stop taking jobs, wait for those running here to end, and leave the queue.

        Until they end it still says it is alive: to the other workers, its jobs
        are running, not left behind by a worker that stopped.
        """
        beating = None
        if self._worker is not None:
            self._worker.stop()  # procrastinate's heartbeats stop with it, its jobs run on
            beating = _task(self._beat_while_stopping(), name="heartbeats while stopping")
        try:
            await self._held_ended()
            for task in self._tasks[1:]:
                task.cancel()
            if self._listening is not None:
                self._listening.cancel()
            if self._tasks:
                await asyncio.wait(self._tasks)  # the worker's own waits for the jobs it took
                if (error := _failure(self._tasks[0])) is not None:
                    logger.warning(
                        "the job worker stopped with an error: %s", database_problem(error) or error
                    )
        finally:
            if beating is not None:
                beating.cancel()

    async def _held_ended(self) -> None:
        """Until every call this process holds as a job has ended and been recorded."""
        watchers = [held.watcher for held in self._held.values() if held.watcher is not None]
        if watchers:
            await asyncio.wait(watchers)

    async def _beat_while_stopping(self) -> None:
        while self.worker_id is not None:
            await asyncio.sleep(self.settings.worker_heartbeat_seconds)
            try:
                await self.queue.app.job_manager.update_heartbeat(self.worker_id)
            except Exception as error:  # the database may be away a moment: beat again later
                logger.info("a heartbeat while stopping failed: %s: %s", type(error).__name__, error)


    async def _watch_stalled(self) -> None:
        while True:
            await asyncio.sleep(self.settings.worker_heartbeat_seconds)
            await self._settle_logged()

    async def _settle_logged(self) -> None:
        try:
            await self.settle_stalled()
        except Exception as error:  # the database may be away a moment: look again later
            said = database_problem(error) or f"{type(error).__name__}: {error}"
            logger.warning("looking for stalled jobs failed: %s", said)

    async def _record_kept(self) -> None:
        spool = ResultSpool.under(self.settings.data_dir)
        try:
            await KeepingLog(self.log.database, spool).record_kept()
        except Exception as error:  # one more try at the next start
            logger.warning("recording kept job results failed: %s: %s", type(error).__name__, error)

    async def _until_done(self, held: _Held, observer: RequestObserver | None) -> None:
        try:
            result: ToolResult | None = await held.work
        except asyncio.CancelledError:
            result = None
        except Exception as error:  # the pipeline returns failures as results; this is a bug
            result = ToolResult.from_error(ToolError(redact(f"{held.call.call_name} crashed: {error}")))
        try:
            if observer is not None:
                if result is None:
                    await observer.cancelled(held.call)
                else:
                    await observer.finished(held.call, result)
            status = "aborted" if result is None else "succeeded"
            await self.queue.finish(held.job_id, status)
        except Exception as error:  # a record that fails must not take the process down
            logger.warning("ending held job %s failed: %s", held.job_id, error)

    async def _listen_for_aborts(self) -> None:
        async def on_notice(*, channel: str, payload: str) -> None:
            notice = json.loads(payload)
            held = self._held.get(int(notice.get("job_id", 0)))
            if notice.get("type") == "abort_job_requested" and held is not None:
                held.work.cancel()

        await self.queue.connector.listen_notify(on_notification=on_notice, channels=[ABORTS])


async def takers_elsewhere(queue: JobQueue, queues: list[str], *, seconds: float) -> bool:
    """Whether a live worker of another process takes jobs from one of `queues` (one silent
    for `seconds`, or a process of this machine that is gone, does not count)."""
    rows = await queue.query(TAKERS_SQL, queues=queues, seconds=seconds)
    return any(row["owner"] != OWNER and is_alive(str(row["owner"])) for row in rows)


def _task(coroutine: Coroutine[object, object, None], *, name: str) -> asyncio.Task[None]:
    # A fresh context: a worker started inside a graph run must not run as part of it.
    return asyncio.get_running_loop().create_task(
        coroutine, name=name, context=contextvars.Context()
    )


def _failure(task: asyncio.Task[None]) -> BaseException | None:
    if task.cancelled():
        return None
    return task.exception()

