"""Workers take only jobs of the folder contents they still hold (issue 47, items 7 and 10).

A worker whose copy changed gives back a job it took, before anything of it
ran, and takes no more of that content; a job no live worker holds says why it
waits. (With real worker processes: `test_workers`.)
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from sqlalchemy import text

from orchestrator.cli.repl import job_line
from orchestrator.folders.discovery import ToolFolder, content_hash
from orchestrator.jobs.execute import JobExecutor
from orchestrator.jobs.job import JobArgs, content_queue
from orchestrator.jobs.queue import GiveBack, JobQueue, JobRow
from orchestrator.jobs.runner import JobRunner
from orchestrator.jobs.trust import approval_of, record, tool_folders
from orchestrator.jobs.waiting import _Queued, _reason  # pyright: ignore[reportPrivateUsage]  # the wording, without live workers of other tests
from orchestrator.jobs.worker import JobWorker
from orchestrator.settings import load_settings
from orchestrator.store import Database
from orchestrator.store.queue_schema import SCHEMA
from orchestrator.store.requests import OWNER, RequestLog
from orchestrator.store.sessions import claim_session
from orchestrator.testing import call_tools
from orchestrator.tools.request_log import CallRecord
from tests.jobs.processes import outcome
from tests.jobs.test_handover import open_runtime

pytestmark = pytest.mark.db

ROW_SQL = f"SELECT queues FROM {SCHEMA}.worker_processes WHERE worker_id = %(worker_id)s"


ABORT_SQL = f"UPDATE {SCHEMA}.procrastinate_jobs SET abort_requested = true WHERE id = %(job_id)s"


class _Cancelling:
    """Gives back the job it is handed, as one whose copy changed, once the job is cancelled."""

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue

    async def stale(self) -> list[ToolFolder]:
        return []

    async def run(self, args: JobArgs, *, job_id: int) -> None:
        # Asked to abort as `cancel` asks, but without its notice: the notice would have the
        # worker cancel this very task first, a race with the give-back this test is about.
        await self.queue.execute(ABORT_SQL, job_id=job_id)
        raise GiveBack("its copy of brewer changed")


class _Executor:
    """Runs nothing; notes each job it is handed. `changes`: its copy changes as it takes the
    first one (it gives that one back, as `execute.JobExecutor` does, and holds it no more)."""

    def __init__(self, folder: ToolFolder, *, changes: bool) -> None:
        self.folder = folder
        self.changes = changes
        self.changed = False
        self.runs: list[str] = []
        self.handed = asyncio.Event()

    async def stale(self) -> list[ToolFolder]:
        return [self.folder] if self.changed else []

    async def run(self, args: JobArgs, *, job_id: int) -> None:
        self.runs.append(args.request_id)
        self.handed.set()
        if self.changes:
            self.changed = True
            raise GiveBack("its copy of brewer changed")


async def test_a_job_given_back_by_a_worker_whose_copy_changed_runs_once_on_one_that_holds_it(
    tmp_path: Path, database_url: str, database: Database
):
    settings = load_settings(data_dir=tmp_path / "data", database_url=database_url, embeddings="none")
    digest = uuid.uuid4().hex * 2
    folder = cast("ToolFolder", SimpleNamespace(key="brewer", digest=digest))
    queue = JobQueue(database)
    await queue.open()
    stale, healthy = _Executor(folder, changes=True), _Executor(folder, changes=False)
    stopped = []
    workers = [
        JobWorker(
            queue, RequestLog(database), settings=settings, executor=executor,
            queues=[content_queue(digest)], on_stale=stopped.append,
        )
        for executor in (stale, healthy)
    ]
    try:
        await workers[0].start()
        job_id = await queue.defer(JobArgs(request_id=f"r-{uuid.uuid4().hex}", user_id="u", folder="brewer", digest=digest))
        await asyncio.wait_for(stale.handed.wait(), 60)
        job = await _until(queue, job_id, lambda row: row.status == "todo")
        assert job.attempts == 0, "a job given back is not an attempt"
        await _until_stopped(workers[0], stopped)
        assert workers[0].holding == []
        assert (await queue.query(ROW_SQL, worker_id=workers[0].worker_id))[0]["queues"] == []

        await workers[1].start()
        await asyncio.wait_for(healthy.handed.wait(), 60)
        await _until(queue, job_id, lambda row: row.status == "succeeded")
    finally:
        for worker in workers:
            if worker.worker_id is not None:
                await worker.stop()
        await queue.close()

    assert stale.runs == healthy.runs == [job.args.request_id], "each was handed it once"
    assert stopped == [[folder]], "the change is told once"


async def test_a_job_cancelled_while_it_is_given_back_ends_cancelled(
    tmp_path: Path, database_url: str, database: Database
):
    settings = load_settings(data_dir=tmp_path / "data", database_url=database_url, embeddings="none")
    user, session, request_id = f"u-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex}", f"r-{uuid.uuid4().hex}"
    await claim_session(database, session, user_id=user)
    call = CallRecord(
        request_id=request_id, parent_request_id=None, session_id=session, user_id=user,
        tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
    )
    await RequestLog(database).started(call)
    digest = uuid.uuid4().hex * 2
    queue = JobQueue(database)
    await queue.open()
    worker = JobWorker(
        queue, RequestLog(database), settings=settings, executor=_Cancelling(queue),
        queues=[content_queue(digest)],
    )
    try:
        await worker.start()
        job_id = await queue.defer(JobArgs(request_id=request_id, user_id=user, folder="brewer", digest=digest))
        await _until(queue, job_id, lambda row: row.status == "aborted")
        for _ in range(1200):  # the request log is told right after the queue
            if await outcome(database, request_id, user=user) is not None:
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
        await queue.close()

    assert await outcome(database, request_id, user=user) == "cancelled"


async def test_jobs_in_the_chat_say_why_a_job_no_worker_holds_waits(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    model = scripted(call_tools(("brewer_brew", {})), "Brewing.")
    runtime, storage, _, _ = await open_runtime(tmp_path, database_url, model)
    runner = JobRunner(runtime, takes_jobs=False)  # no worker here: the job waits in the queue
    digest = content_hash(tmp_path / "sub_graphs" / "brewer")[:12]
    try:
        session = replace(runtime, jobs=runner).session(user_id=f"u-{uuid.uuid4().hex[:6]}")
        await session.run("make coffee")
        [job] = await runner.jobs_of(session.session_id)
    finally:
        await runner.close()
        await storage.close()

    assert job.status == "queued"
    assert job.waiting is not None and job.waiting.startswith("waiting: no worker ")
    assert f"brewer at {digest}" in job.waiting
    assert job_line(job).splitlines()[1] == f"  {job.waiting}"


async def test_a_worker_refuses_a_job_whose_content_the_database_no_longer_approves(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    model = scripted(call_tools(("brewer_brew", {})), "Brewing.")
    runtime, storage, noted, _ = await open_runtime(tmp_path, database_url, model)
    runner = JobRunner(runtime, takes_jobs=False)  # no worker here: the job waits in the queue
    user = f"u-{uuid.uuid4().hex[:6]}"
    queue = JobQueue(database)
    try:
        result = await replace(runtime, jobs=runner).session(user_id=user).run("make coffee")
        request_id = result.tool_calls[0].request_id
        await queue.open()
        job = await queue.job_of(request_id)
        assert job is not None
        [folder] = {f.key: f for f in tool_folders(runtime).values()}.values()
        await record(database, [replace(approval_of(folder), approved=False)])  # revoked since
        executor = JobExecutor(runtime, found={folder.key: folder.digest}, name="box2")
        await executor.run(job.args, job_id=job.job_id)
        async with database.user_transaction(user) as connection:
            error = await connection.scalar(
                text("SELECT error FROM requests WHERE request_id = :r"), {"r": request_id}
            )
    finally:
        await queue.close()
        await runner.close()
        await storage.close()

    assert not noted.exists(), "it never ran"
    assert error["error_code"] == "not_approved"
    assert error["message"] == (
        f"brewer_brew did not run on worker {OWNER}: brewer with content {folder.digest[:12]} is not "
        "approved in the database any more. Every worker needs the approved folders"
    )


def test_with_no_live_worker_a_waiting_job_says_to_start_one():
    job = _Queued(job_id=1, queue=content_queue("ab" * 32), folder="brewer", digest="ab" * 32)
    assert _reason(job, live=None, approved=set()) == (
        "waiting: no worker runs; start `orchestrator worker` on a copy of brewer at abababababab"
    )
    approved = {("brewer", "cd" * 32), ("brewer", "ef" * 32), ("other", "ab" * 32)}
    assert _reason(job, live={content_queue("cd" * 32)}, approved=approved).startswith(
        "waiting: no worker holds brewer at abababababab (workers hold: cdcdcdcdcdcd); "
    )


async def _until(queue: JobQueue, job_id: int, condition: Callable[[JobRow], bool]) -> JobRow:
    for _ in range(1200):
        row = await queue.job(job_id)
        if row is not None and condition(row):
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never got there: {await queue.job(job_id)}")


async def _until_stopped(worker: JobWorker, stopped: list[object]) -> None:
    """Until `worker` looked for jobs again and found its copy changed (it tells `stopped`)."""
    for _ in range(1200):
        if stopped:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the worker never noticed its copy changed: {worker.holding}")
