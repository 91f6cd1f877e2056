"""Jobs whose worker stopped: found by its heartbeat (or, here, its process), run again or failed.

Workers on another machine are known only by their heartbeats: these tests
give a worker's registration an owner on another host and an old heartbeat.
"""

from __future__ import annotations

import os
import socket
import uuid

from orchestrator.jobs.job import JobArgs, content_queue
from orchestrator.jobs.queue import JobQueue
from orchestrator.jobs.stalled import settle_stalled, stalled_jobs
from orchestrator.store import Database
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.requests import OWNER, RequestLog, request_history
from orchestrator.store.sessions import claim_session
from orchestrator.tools.request_log import CallRecord

ELSEWHERE = "another-host:{n}:1700000000"  # a process of another machine: assumed alive


async def worker_elsewhere(queue: JobQueue, n: int, *, silent_for: str, owner: str | None = None) -> int:
    """A worker registered by a process on another machine (or `owner`), last heard from `silent_for` ago."""
    worker_id = await queue.app.job_manager.register_worker()
    await queue.execute(
        "INSERT INTO job_queue.worker_processes (worker_id, owner, queues, concurrency) "
        "VALUES (%(w)s, %(owner)s, '{}', 1)",
        w=worker_id, owner=owner or ELSEWHERE.format(n=n),
    )
    await queue.execute(
        "UPDATE job_queue.procrastinate_workers SET last_heartbeat = now() - %(ago)s::interval "
        "WHERE id = %(w)s",
        w=worker_id, ago=silent_for,
    )
    return worker_id


async def running_call(database: Database, queue: JobQueue, worker_id: int, **args: object) -> tuple[CallRecord, int]:
    """A background call taken by `worker_id`: in the request log and in the queue."""
    user, session = f"u-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:8]}"
    await claim_session(database, session, user_id=user)
    call = CallRecord(
        request_id=uuid.uuid4().hex, parent_request_id=None, session_id=session, user_id=user,
        tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
        idempotent=bool(args.get("idempotent")),
    )
    await RequestLog(database).started(call)
    job = JobArgs(request_id=call.request_id, user_id=user, **args)  # type: ignore[arg-type]
    job_id = await queue.hold(job, worker_id=worker_id)
    await JobRequests(database).take(call.request_id, user_id=user, job_id=job_id, worker=ELSEWHERE)
    return call, job_id


async def test_a_job_is_stalled_once_its_worker_is_silent_past_the_stalled_time(database: Database):
    queue = JobQueue(database)
    await queue.open()
    try:
        silent = await worker_elsewhere(queue, 1, silent_for="1 hour")
        heard = await worker_elsewhere(queue, 2, silent_for="1 second")
        _, lost = await running_call(database, queue, silent)
        _, fine = await running_call(database, queue, heard)
        stalled = {job.job_id for job in await stalled_jobs(queue, seconds=30)}
    finally:
        await queue.close()

    assert lost in stalled
    assert fine not in stalled, "a worker heard from within the stalled time is alive"


async def test_a_stalled_idempotent_job_is_queued_again_and_any_other_fails(database: Database):
    queue = JobQueue(database)
    await queue.open()
    log = RequestLog(database)
    try:
        silent = await worker_elsewhere(queue, 3, silent_for="1 hour")
        again, again_id = await running_call(
            database, queue, silent, idempotent=True, folder="brewer", digest="d" * 64, max_retries=2
        )
        once, once_id = await running_call(database, queue, silent, folder="brewer", digest="d" * 64)
        settled = {done.job.job_id: done.outcome for done in await settle_stalled(queue, log, seconds=30)}
        twice = await settle_stalled(queue, log, seconds=30)
        requeued, failed = await queue.job(again_id), await queue.job(once_id)
    finally:
        await queue.close()

    assert (settled[again_id], settled[once_id]) == ("requeued", "failed")
    assert [done.job.job_id for done in twice if done.job.job_id in (again_id, once_id)] == []
    assert requeued is not None and (requeued.status, requeued.queue) == ("todo", content_queue("d" * 64))
    assert requeued.attempts == 1
    assert failed is not None and failed.status == "failed"
    again_events = await request_history(database, again.request_id, user_id=str(again.user_id))
    assert [s for s, _ in again_events][-2:] == ["running", "requeued"]
    assert "stopped: run again, attempt 2 of 3" in str(again_events[-1][1])
    once_events = await request_history(database, once.request_id, user_id=str(once.user_id))
    assert [s for s, _ in once_events][-2:] == ["failed", "closed"]


async def test_a_job_of_a_live_process_here_is_not_stalled_however_late_its_heartbeat(database: Database):
    """A busy machine delays heartbeats (or a stopping worker's jobs run on): the process is the truth."""
    gone = f"{socket.gethostname()}:{os.getpid()}:1"  # this pid, started at another time: gone
    queue = JobQueue(database)
    await queue.open()
    try:
        busy = await worker_elsewhere(queue, 4, silent_for="1 hour", owner=OWNER)
        dead = await worker_elsewhere(queue, 5, silent_for="1 second", owner=gone)
        _, running = await running_call(database, queue, busy)
        _, left = await running_call(database, queue, dead)
        stalled = {job.job_id for job in await stalled_jobs(queue, seconds=30)}
    finally:
        await queue.close()

    assert running not in stalled, "its process runs it still"
    assert left in stalled, "its process is gone, whatever its heartbeat said"
