"""The handover in this process: a background call becomes a job keyed by its request id.

A call of a folder that says `background: true` is queued for the workers of
its content; one that outlives its inline budget goes on here, as a job this
process holds; results come back through the database, into the session, once.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from langchain_core.language_models import BaseChatModel

from orchestrator.conversation.job_board import BackgroundJob
from orchestrator.jobs.delivery import Deliveries
from orchestrator.jobs.queue import HELD, JobQueue, JobRow, content_queue
from orchestrator.jobs.runner import JobRunner
from orchestrator.notes import is_note
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.deferred import DeferredTool
from orchestrator.store import Database, Storage
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.requests import RequestLog, request_history
from orchestrator.testing import call_tools
from tests.jobs.processes import JOB_TOOL, brewer_config, runs
from tests.tool_folders import write_folder


async def open_runtime(
    tmp_path: Path, database_url: str, model: BaseChatModel, **settings: object
) -> tuple[Orchestrator, Storage, Path, Path]:
    """A runtime over the brewer folder (approved) with storage; its runs file and gate."""
    noted, gate = tmp_path / "runs", tmp_path / "gate"
    config = settings.pop("config", brewer_config())
    write_folder(
        tmp_path / "sub_graphs", "brewer", config=config,  # type: ignore[arg-type]
        code=JOB_TOOL.format(runs=str(noted), gate=str(gate)),
    )
    values = {"sub_graphs_dir": tmp_path / "sub_graphs", "data_dir": tmp_path / "data"}
    loaded = load_settings(**values, database_url=database_url, embeddings="none", **settings)
    storage = await Storage.open(loaded)
    runtime = Orchestrator.create(loaded, model=model, ask=lambda folder, status: True, storage=storage)
    return runtime, storage, noted, gate


async def test_a_background_call_becomes_a_job_keyed_by_its_request_id(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    model = scripted(call_tools(("brewer_brew", {})), "Brewing.")
    runtime, storage, noted, _ = await open_runtime(tmp_path, database_url, model)
    runner = JobRunner(runtime, takes_jobs=False)  # no worker here: the job waits in the queue
    user = f"u-{uuid.uuid4().hex[:6]}"
    try:
        session = replace(runtime, jobs=runner).session(user_id=user)
        result = await session.run("make coffee")
        request_id = result.tool_calls[0].request_id
        queue = JobQueue(database)
        await queue.open()
        job = await queue.job_of(request_id)
        [listed] = await runner.jobs_of(session.session_id)
        stranger = JobRunner(runtime, takes_jobs=False)  # another user's chat
        replace(runtime, jobs=stranger).session(user_id=f"m-{uuid.uuid4().hex[:6]}")
        not_theirs = await stranger.cancel_job(request_id)
        await stranger.close()
        cancelled = await runner.cancel_job(request_id)
        await queue.close()
        history = await request_history(database, request_id, user_id=user)
    finally:
        await runner.close()
        await storage.close()

    [brewer] = [lt.folder for lt in runtime.loaded_folders()]
    assert job is not None and job.args.request_id == request_id
    assert (job.queue, job.status) == (content_queue(brewer.digest), "todo")
    assert (job.args.user_id, job.args.folder, job.args.digest) == (user, "brewer", brewer.digest)
    assert (listed.job_id, listed.status) == (request_id, "queued")
    assert not not_theirs, "a task is cancelled only by its own user"
    assert cancelled
    assert [s for s, _ in history] == [
        "created", "acknowledged", "running", "queued", "cancelled", "closed"
    ]
    assert history[3] == ("queued", f"job {job.job_id}")
    assert runs(noted) == [], "no worker ran it"


async def test_a_call_past_its_inline_budget_goes_on_here_as_a_held_job(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    model = scripted(call_tools(("brewer_brew", {})), "Still brewing.", "The coffee is ready.")
    runtime, storage, noted, gate = await open_runtime(
        tmp_path, database_url, model,
        config={"name": "brewer", "description": "Brews coffee.", "version": "1"},
        inline_budget_seconds=0,
    )
    runner = JobRunner(runtime, takes_jobs=False)
    user = f"u-{uuid.uuid4().hex[:6]}"
    try:
        session = replace(runtime, jobs=runner).session(user_id=user)
        result = await session.run("make coffee")
        request_id = result.tool_calls[0].request_id
        queue = JobQueue(database)
        await queue.open()
        held = await _job_once_held(queue, request_id)
        gate.write_text("open")
        await runner.drain(session.session_id)  # its end, and its follow-up turn
        done = await queue.job(held.job_id)
        await queue.close()
        history = await session.history()
        events = await request_history(database, request_id, user_id=user)
    finally:
        await runner.close()
        await storage.close()

    assert (held.queue, held.status) == (HELD, "doing")
    assert done is not None and done.status == "succeeded"
    assert [pid for _, pid in runs(noted)] == [os.getpid()], "it ran here"
    assert [s for s, _ in events] == [
        "created", "running", "acknowledged", "held", "completed", "closed"
    ]
    assert is_note(history[-2]) and "has completed" in history[-2].text
    assert history[-1].text == "The coffee is ready."


async def _job_once_held(queue: JobQueue, request_id: str) -> JobRow:
    for _ in range(2400):  # the runner makes the held job beside the turn's end
        job = await queue.job_of(request_id)
        if job is not None:
            return job
        await asyncio.sleep(0.05)
    raise AssertionError("no held job")


async def test_a_result_is_delivered_once_however_many_processes_have_the_session_open(
    database: Database,
):
    user, session = f"u-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:8]}"
    request_id = uuid.uuid4().hex
    log = RequestLog(database)
    await _ended_job(log, database, request_id, user=user, session=session)
    got: list[tuple[str, str]] = []

    def deliver_to(name: str) -> Callable[[BackgroundJob], Awaitable[None]]:
        async def delivery(task: BackgroundJob) -> None:
            got.append((name, task.job_id))

        return delivery

    one, two = Deliveries(database, listeners=[]), Deliveries(database, listeners=[])
    try:
        for name, deliveries in (("one", one), ("two", two)):
            deliveries.watch(session, user_id=user, delivery=deliver_to(name))
        await asyncio.gather(one.deliver(session), two.deliver(session))
        again = await one.catch_up(session, user_id=user)
    finally:
        await one.close()
        await two.close()

    assert [task_id for _, task_id in got] == [request_id], "delivered once, by one of them"
    assert again == []


async def test_a_user_sees_and_claims_only_their_own_background_calls(database: Database):
    user, other, session = f"u-{uuid.uuid4().hex[:6]}", f"m-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:8]}"
    request_id = uuid.uuid4().hex
    await _ended_job(RequestLog(database), database, request_id, user=user, session=session)
    jobs = JobRequests(database)

    theirs = await jobs.background_calls(user_id=other, session_id=session)
    stolen = await jobs.claim_delivery(request_id, user_id=other)
    pending = await jobs.undelivered(session, user_id=other)
    mine = await jobs.background_calls(user_id=user, session_id=session)

    assert (theirs, stolen, pending) == ([], False, [])
    assert [call.request_id for call in mine] == [request_id]


async def _ended_job(log: RequestLog, database: Database, request_id: str, *, user: str, session: str) -> None:
    """A background call of `user` that a worker ran as job 1 and that has ended."""
    from orchestrator.store.sessions import claim_session
    from orchestrator.tools.request_log import CallRecord
    from orchestrator.tools.results import ToolResult

    await claim_session(database, session, user_id=user)
    call = CallRecord(
        request_id=request_id, parent_request_id=None, session_id=session, user_id=user,
        tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
    )
    await log.started(call)
    await JobRequests(database).take(request_id, user_id=user, job_id=1, worker="a worker")
    await log.finished(call, ToolResult(message="coffee is ready", request_id=request_id))


async def test_a_deferred_folders_background_call_is_queued_and_run_by_a_worker(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    # Issue 36: a second start offers the folder from its manifest; the job's worker imports it.
    model = scripted(call_tools(("brewer_brew", {})), "Brewing.", "The coffee is ready.")
    first, storage, noted, gate = await open_runtime(tmp_path, database_url, model)
    runtime = Orchestrator.create(first.settings, model=model, storage=storage)
    gate.write_text("open")
    runner = JobRunner(runtime, takes_jobs=True)  # the worker in this process takes the job
    user = f"u-{uuid.uuid4().hex[:6]}"
    try:
        session = replace(runtime, jobs=runner).session(user_id=user)
        result = await session.run("make coffee")
        request_id = result.tool_calls[0].request_id
        await runner.drain(session.session_id)  # its end, and its follow-up turn
        queue = JobQueue(database)
        await queue.open()
        job = await queue.job_of(request_id)
        await queue.close()
        history = await session.history()
    finally:
        await runner.close()
        await storage.close()

    [brewer] = [tool for tool in runtime.tools if tool.name == "brewer_brew"]
    assert isinstance(brewer, DeferredTool)
    assert job is not None and job.queue == content_queue(runtime.sub_agents[0].folder.digest)
    assert job.status == "succeeded"
    assert [rid for rid, _ in runs(noted)] == [request_id]
    assert history[-1].text == "The coffee is ready."


async def test_a_job_its_worker_took_before_the_handover_recorded_it_stays_running(database: Database):
    """This process's own worker may take the job before `queued` is written: it is not undone."""
    from orchestrator.store.sessions import claim_session
    from orchestrator.tools.request_log import CallRecord

    user, session, request_id = f"u-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    await claim_session(database, session, user_id=user)
    call = CallRecord(
        request_id=request_id, parent_request_id=None, session_id=session, user_id=user,
        tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
    )
    log, jobs = RequestLog(database), JobRequests(database)
    await log.started(call)
    await jobs.take(request_id, user_id=user, job_id=7, worker="this process's worker")
    recorded = await jobs.queued(call, job_id=7)  # the handover's record, arriving late

    assert not recorded
    history = [status for status, _ in await request_history(database, request_id, user_id=user)]
    assert history[-1] == "running" and "queued" not in history, history
    (task,) = await jobs.background_calls(user_id=user, session_id=session)
    assert task.status == "running"
