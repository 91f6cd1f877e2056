"""Jobs whose worker stopped: run again where that is safe, else failed, and the user told.

A job is stalled when its worker has stopped: on this machine, when the
process behind it is gone (known at once, and only then: a busy process's
heartbeat may be late, and a stopping one's jobs run on to their end); a
worker of another machine, or of no known process, when it has not said it
is alive for `worker_stalled_seconds` (its heartbeat). Every worker looks, at
every heartbeat. A stalled job whose folder says `idempotent: true` is queued
again for any worker, after a backoff, up to its folder's `max_retries` times
(at least once); any other fails as interrupted, which reaches its session as
every ended job does. The queue's own statement settles each job once, however
many workers look: the request log is written only by the one that did.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from orchestrator.dispatch.policy import backoff
from orchestrator.jobs.job import JobArgs
from orchestrator.jobs.queue import JobQueue, integer
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.queue_schema import SCHEMA
from orchestrator.store.requests import RequestLog, has_stopped
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.request_status import RequestStatus

logger = logging.getLogger(__name__)

RUNNING_JOBS = f"""
    SELECT j.id, j.attempts, j.args, j.abort_requested, p.owner, r.outcome,
        (w.id IS NULL OR w.last_heartbeat < now() - make_interval(secs => %(seconds)s)) AS silent
    FROM {SCHEMA}.procrastinate_jobs j
    LEFT JOIN {SCHEMA}.procrastinate_workers w ON w.id = j.worker_id
    LEFT JOIN {SCHEMA}.worker_processes p ON p.worker_id = j.worker_id
    LEFT JOIN public.requests r ON r.request_id = j.args ->> 'request_id'
    WHERE j.status = 'doing'
"""
AGAIN = "its worker ({owner}) stopped: run again, attempt {attempt} of {tries}"


@dataclass(frozen=True)
class Stalled:
    """A running job whose worker stopped."""

    job_id: int
    attempts: int  # times it was queued again already
    args: JobArgs
    owner: str | None  # the process of its worker, if known
    outcome: str | None  # how its call ended, if the worker recorded that before it stopped
    cancelled: bool = False  # someone asked for it to be cancelled

    @property
    def tries(self) -> int:
        """How many runs it may have: its first, and its retries (idempotent calls only)."""
        if not (self.args.idempotent and self.args.folder and self.args.digest):
            return 1
        return 1 + max(1, self.args.max_retries)


async def stalled_jobs(queue: JobQueue, *, seconds: float) -> list[Stalled]:
    """The running jobs whose worker is silent past `seconds`, or is a process here that is gone."""
    rows = await queue.query(RUNNING_JOBS, seconds=seconds)
    found = []
    for row in rows:
        owner = row["owner"] if isinstance(row["owner"], str) else None
        if has_stopped(owner, silent=bool(row["silent"])):
            args = row["args"]
            values = json.loads(args) if isinstance(args, str) else args
            assert isinstance(values, dict)
            found.append(
                Stalled(
                    job_id=integer(row["id"]),
                    attempts=integer(row["attempts"]),
                    args=JobArgs.of(values),
                    owner=owner,
                    outcome=row["outcome"] if isinstance(row["outcome"], str) else None,
                    cancelled=bool(row["abort_requested"]),
                )
            )
    return found


@dataclass(frozen=True)
class Settled:
    """A stalled job settled, and how: `requeued`, `failed`, `cancelled`, or `ended` (its call
    had ended before its worker stopped); `call` is its call, as the request log holds it."""

    job: Stalled
    outcome: str
    call: CallRecord | None


async def settle_stalled(queue: JobQueue, log: RequestLog, *, seconds: float) -> list[Settled]:
    """Settle every stalled job (those another worker settles meanwhile are left out)."""
    settled = []
    for job in await stalled_jobs(queue, seconds=seconds):
        try:
            done = await _settle(queue, log, job)
        except Exception as error:  # one job's trouble must not stop the others being settled
            logger.warning("settling stalled job %s failed: %s: %s", job.job_id, type(error).__name__, error)
            continue
        if done is not None:
            settled.append(done)
    return settled


async def _settle(queue: JobQueue, log: RequestLog, job: Stalled) -> Settled | None:
    if job.outcome is not None:  # its call ended; its worker stopped before ending the job
        status = "succeeded" if job.outcome == RequestStatus.COMPLETED else "failed"
        return Settled(job, "ended", None) if await queue.finish(job.job_id, status) else None
    jobs = JobRequests(log.database)
    held = await jobs.load(job.args.request_id, user_id=job.args.user_id)
    call = held.call if held is not None else None
    if job.cancelled:  # it was being cancelled when its worker stopped: it is
        if not await queue.finish(job.job_id, "aborted"):
            return None
        if call is not None:
            await log.cancelled(call)
        return Settled(job, "cancelled", call)
    if job.attempts + 1 < job.tries:
        at = datetime.now(UTC) + timedelta(seconds=backoff(job.attempts + 1))
        assert job.args.digest is not None  # `tries` is 1 for a call of no folder
        if not await queue.retry(job.job_id, at=at, digest=job.args.digest):
            return None  # another worker settled it
        if call is not None:
            detail = AGAIN.format(owner=job.owner or "unknown", attempt=job.attempts + 2, tries=job.tries)
            await jobs.requeued(call, job_id=job.job_id, detail=detail)
        return Settled(job, "requeued", call)
    if not await queue.finish(job.job_id, "failed"):
        return None
    if call is not None:
        await log.interrupted(call)
    return Settled(job, "failed", call)
