"""The queue itself: jobs by request id, made, held, cancelled, finished."""

from __future__ import annotations

import uuid

from orchestrator.jobs.queue import HELD, JobArgs, JobQueue, content_queue
from orchestrator.store import Database


async def test_a_job_is_found_by_its_request_id_and_a_queued_one_cancelled_at_once(database: Database):
    queue = JobQueue(database)
    await queue.open()
    try:
        request_id = uuid.uuid4().hex
        args = JobArgs(request_id=request_id, user_id="u", folder="f", digest="d", arguments={"a": 1})
        job_id = await queue.defer(args)
        queued = await queue.job_of(request_id)
        outcome = await queue.cancel(request_id)
        after = await queue.job_of(request_id)
        again = await queue.cancel(request_id)
    finally:
        await queue.close()

    assert queued is not None and (queued.job_id, queued.queue, queued.status) == (job_id, content_queue("d"), "todo")
    assert queued.args == args
    assert outcome == "cancelled"
    assert after is not None and after.status == "cancelled"
    assert again is None, "nothing left to cancel"


async def test_a_held_job_runs_in_its_process_and_is_finished_there(database: Database):
    queue = JobQueue(database)
    await queue.open()
    try:
        worker_id = await queue.app.job_manager.register_worker()
        request_id = uuid.uuid4().hex
        job_id = await queue.hold(JobArgs(request_id=request_id, user_id="u"), worker_id=worker_id)
        held = await queue.job(job_id)
        finished = await queue.finish(job_id, "succeeded")
        twice = await queue.finish(job_id, "succeeded")
        done = await queue.job(job_id)
        await queue.app.job_manager.unregister_worker(worker_id)
    finally:
        await queue.close()

    assert held is not None and (held.queue, held.status, held.worker_id) == (HELD, "doing", worker_id)
    assert (finished, twice) == (True, False)
    assert done is not None and done.status == "succeeded"
