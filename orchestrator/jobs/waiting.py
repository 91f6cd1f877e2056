"""Why a queued job waits: no live worker holds the folder content it was made with.

Each worker records the queues it takes jobs from, one per folder content it
holds (`worker.JobWorker`, table `job_queue.worker_processes`), and drops the
queue of a content whose copy changed since it loaded it. A job waits in the
queue of its content; when no worker that has said it is alive within
`ORCHESTRATOR_WORKER_STALLED_SECONDS` (and, on this machine, whose process still
runs) takes that queue, `jobs list` and `/jobs`
say so, with the contents of that folder the live workers do hold.

No procrastinate here: `jobs list` reads the queue's tables with the owner login.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from orchestrator.jobs.job import content_queue
from orchestrator.jobs.trust import approved_contents
from orchestrator.store.engine import Database
from orchestrator.store.queue_schema import SCHEMA
from orchestrator.store.requests import is_alive

QUEUED_SQL = text(
    f"""SELECT id, queue_name, args ->> 'folder' AS folder, args ->> 'digest' AS digest
    FROM {SCHEMA}.procrastinate_jobs WHERE id = ANY(:ids) AND status = 'todo'"""
)
# The queues each live worker takes jobs from (one silent for `seconds` has stopped), and its process.
LIVE_QUEUES_SQL = text(
    f"""SELECT p.owner, p.queues FROM {SCHEMA}.worker_processes p
    JOIN {SCHEMA}.procrastinate_workers w ON w.id = p.worker_id
    WHERE w.last_heartbeat > now() - make_interval(secs => :seconds)"""
)
NO_HOLDER = (
    "waiting: no worker holds {key} at {digest} (workers hold: {held}); start a worker on "
    "this copy of the folder, or update the workers' folders"
)
NO_WORKER = "waiting: no worker runs; start `orchestrator worker` on a copy of {key} at {digest}"


@dataclass(frozen=True)
class _Queued:
    job_id: int
    queue: str
    folder: str
    digest: str


async def why_waiting(database: Database, job_ids: list[int], *, seconds: float) -> dict[int, str]:
    """Why each of the queued jobs `job_ids` (the queue's ids) waits, by id: only those no live
    worker can take (a job a live worker can take is about to run, or waits its turn)."""
    if not job_ids:
        return {}
    async with database.admin_transaction() as connection:
        rows = (await connection.execute(QUEUED_SQL, {"ids": job_ids})).all()
        queued = [
            _Queued(row.id, row.queue_name, row.folder, row.digest)
            for row in rows
            if row.folder is not None and row.digest is not None
        ]
        if not queued:
            return {}
        found = (await connection.execute(LIVE_QUEUES_SQL, {"seconds": seconds})).all()
    workers = [row for row in found if is_alive(row.owner)]  # not a gone process of this machine
    live = {queue for row in workers for queue in row.queues}
    stuck = [job for job in queued if job.queue not in live]
    if not stuck:
        return {}
    approved = await approved_contents(database, sorted({job.folder for job in stuck}))
    return {job.job_id: _reason(job, live=live if workers else None, approved=approved) for job in stuck}


def _reason(job: _Queued, *, live: set[str] | None, approved: set[tuple[str, str]]) -> str:
    """`live`: the queues live workers take jobs from (None: no worker is alive)."""
    if live is None:
        return NO_WORKER.format(key=job.folder, digest=job.digest[:12])
    held = sorted(d[:12] for k, d in approved if k == job.folder and content_queue(d) in live)
    return NO_HOLDER.format(
        key=job.folder, digest=job.digest[:12], held=", ".join(held) or "none of its contents"
    )
