"""The job queue: procrastinate on the product's database, as the owner login, in schema `job_queue`.

One task, `run_call`: run one background call, by its request id. A job's
arguments (`JobArgs`) say whose call it is and what a worker needs that the
request log does not hold: the folder and content hash it was made with, the
arguments as approved, its level. A job waits in the queue of its folder's
content (`content_queue`): a worker takes jobs only from the queues of the
contents it loaded, so a job reaches only workers that hold what it was made
with. The queue `held` is for calls a process runs itself (they outlived their
inline budget there): those jobs are never taken, only watched (heartbeats,
cancellation), and queued for any worker if their process stops.

Imported only when a job is made or a worker starts: procrastinate loads in a
tenth of a second, which `chat` and `ask` do not pay otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, LiteralString, Protocol

from procrastinate import App, BaseRetryStrategy, JobContext, PsycopgConnector, RetryDecision
from procrastinate.exceptions import ConnectorException
from procrastinate.jobs import Job, Status
from psycopg_pool import AsyncConnectionPool

from orchestrator.errors import GiveBack as GiveBack  # raised by executors, offered here too
from orchestrator.jobs.job import HELD, JobArgs, content_queue
from orchestrator.store.engine import Database
from orchestrator.store.pool import CONNECT_ARGS, RECONNECT_SECONDS, ServerPool
from orchestrator.store.queue_schema import SCHEMA

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder

TASK = "run_call"
EXECUTOR = "executor"  # the key of the worker's executor in procrastinate's job context
POOL_SIZE = 6  # the queue's connections in a process (LISTEN ones apart)
Outcome = Literal["cancelled", "aborting"]


@dataclass(frozen=True)
class JobRow:
    """One job as the queue holds it."""

    job_id: int
    queue: str
    status: str  # todo, doing, succeeded, failed, cancelled, aborted
    attempts: int
    worker_id: int | None
    args: JobArgs


class Executor(Protocol):
    """Runs one job's call in a worker (`execute.JobExecutor`)."""

    async def run(self, args: JobArgs, *, job_id: int) -> None: ...

    async def stale(self) -> list[ToolFolder]:
        """The folders it loaded whose copy here has changed since: it no longer holds their
        content, and takes no job of it."""
        ...


class _GiveBackOnly(BaseRetryStrategy):
    """procrastinate's retry, for jobs given back only: any other failure is recorded in the
    request log by the executor, and the job ends."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        return RetryDecision(retry_in={"seconds": 0}) if isinstance(exception, GiveBack) else None


async def run_call(context: JobContext, **values: object) -> None:
    """The queue's one task: hand the job to the executor of the worker that took it."""
    executor: Executor = context.additional_context[EXECUTOR]
    assert context.job.id is not None  # a job taken from the queue has its id
    await executor.run(JobArgs.of(values), job_id=context.job.id)


JOB_COLUMNS = "id, queue_name, status::text, attempts, worker_id, args"
HOLD_SQL = f"""
    INSERT INTO {SCHEMA}.procrastinate_jobs (queue_name, task_name, lock, args, status, worker_id)
    VALUES (%(queue)s, %(task)s, %(lock)s, %(args)s, 'doing', %(worker_id)s) RETURNING id
"""
JOBS_OF_SQL = f"""
    SELECT {JOB_COLUMNS} FROM {SCHEMA}.procrastinate_jobs
    WHERE args ->> 'request_id' = %(request_id)s ORDER BY id DESC LIMIT 1
"""
JOB_SQL = f"SELECT {JOB_COLUMNS} FROM {SCHEMA}.procrastinate_jobs WHERE id = %(job_id)s"


class JobQueue:
    """The queue of one database: make, watch, retry, cancel and finish jobs.

    `app` is procrastinate's, for its workers (`worker.JobWorker`). Its
    connections log in as the owner (the application role cannot reach the
    queue), with the queue's schema on their search path.
    """

    def __init__(self, database: Database, *, pool_size: int = POOL_SIZE) -> None:
        self.database = database
        connector = PsycopgConnector(
            conninfo=database.libpq_url,
            min_size=1,
            max_size=pool_size,
            reconnect_timeout=RECONNECT_SECONDS,
            kwargs={"options": f"-c search_path={SCHEMA}", **CONNECT_ARGS},
            pool_factory=_server_pool,
        )
        self.app = App(connector=connector)
        self.app.task(name=TASK, pass_context=True, retry=_GiveBackOnly())(run_call)
        self.connector = connector
        self._open = False

    async def open(self) -> None:
        if not self._open:
            await self.app.open_async()
            self._open = True

    async def close(self) -> None:
        if self._open:
            self._open = False
            await self.app.close_async()

    async def defer(self, args: JobArgs) -> int:
        """Queue `args` for the workers of its folder's content; the job's id.

        One job at a time runs for a request (its lock is the request id).
        """
        assert args.digest is not None, "only a folder's call is queued for workers"
        queue = content_queue(args.digest)
        deferrer = self.app.configure_task(TASK, lock=args.request_id, queue=queue)
        return await deferrer.defer_async(**args.to_json())

    async def hold(self, args: JobArgs, *, worker_id: int) -> int:
        """A job for a call running already in the process of `worker_id`; the job's id."""
        values = {
            "queue": HELD,
            "task": TASK,
            "lock": args.request_id,
            "args": args.to_json(),
            "worker_id": worker_id,
        }
        row = await self.connector.execute_query_one_async(HOLD_SQL, **values)
        return int(row["id"])

    async def finish(self, job_id: int, status: Literal["succeeded", "failed", "aborted"]) -> bool:
        """End a job that is still queued or running; False if it is not (someone ended it)."""
        try:
            await self.app.job_manager.finish_job_by_id_async(job_id, Status(status), delete_job=False)
        except ConnectorException:  # not queued or running any more: ended by someone else
            return False
        return True

    async def retry(self, job_id: int, *, at: datetime, digest: str) -> bool:
        """Queue a running job again (from `at`, for the workers of content `digest`); False if
        it is not running."""
        queue = content_queue(digest)
        try:
            await self.app.job_manager.retry_job_by_id_async(job_id, retry_at=at, queue=queue)
        except ConnectorException:
            return False
        return True

    async def cancel(self, request_id: str) -> Outcome | None:
        """Cancel the job of `request_id`: a queued one at once (`cancelled`), a running one
        by asking its worker (`aborting`); None when it has no job that has not ended."""
        job = await self.job_of(request_id)
        if job is None or job.status not in ("todo", "doing"):
            return None
        done = await self.app.job_manager.cancel_job_by_id_async(job.job_id, abort=True)
        if not done:
            return None
        return "cancelled" if job.status == "todo" else "aborting"

    async def job_of(self, request_id: str) -> JobRow | None:
        """The newest job of `request_id`, if it has one."""
        rows = await self.connector.execute_query_all_async(JOBS_OF_SQL, request_id=request_id)
        return _row(rows[0]) if rows else None

    async def job(self, job_id: int) -> JobRow | None:
        rows = await self.connector.execute_query_all_async(JOB_SQL, job_id=job_id)
        return _row(rows[0]) if rows else None

    async def query(self, sql: LiteralString, **values: object) -> list[dict[str, object]]:
        """Rows of `sql` on the queue's connections (the queue's other modules' SQL)."""
        return await self.connector.execute_query_all_async(sql, **values)

    async def execute(self, sql: LiteralString, **values: object) -> None:
        await self.connector.execute_query_async(sql, **values)


def _server_pool(**options: object) -> AsyncConnectionPool:
    """Our pool, which notices a dropped connection without a round trip (procrastinate's
    default checks each connection with one)."""
    options.pop("check", None)
    # procrastinate passes the pool's own keyword arguments through untyped (`pool_factory: Callable[...]`).
    return ServerPool(**options)  # pyright: ignore[reportArgumentType]


def _row(row: Mapping[str, object]) -> JobRow:
    args = row["args"]
    values = json.loads(args) if isinstance(args, str) else args
    assert isinstance(values, dict)
    worker = row["worker_id"]
    return JobRow(
        job_id=integer(row["id"]),
        queue=str(row["queue_name"]),
        status=str(row["status"]),
        attempts=integer(row["attempts"]),
        worker_id=int(worker) if isinstance(worker, int) else None,
        args=JobArgs.of(values),
    )


def integer(value: object) -> int:
    """A column the queue keeps as an integer (an id, a count), as its rows hold it."""
    if not isinstance(value, int):
        raise TypeError(f"expected an integer column, got {value!r}")
    return value
