"""`orchestrator worker`: run background jobs of the queue, on any machine that reaches the database.

It loads the tool folders found here whose content is approved in the
database (see `jobs.trust`), takes the jobs made with those contents, and
runs each through the dispatch pipeline. Ctrl-C (or SIGTERM) stops it taking
jobs and waits for those running; a second one stops it at once, leaving
them to the other workers (run again where idempotent, else failed).
`--until-idle` stops it after ORCHESTRATOR_WORKER_IDLE_SECONDS with nothing
to do: how `ask --no-wait` starts one for what it leaves queued. While the
database does not answer (at the start, or later) it tries again, with a line
per attempt and a wait that doubles up to 30 s, and takes jobs once it is back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from contextlib import suppress
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import err, out, settings_or_exit, user_errors
from orchestrator.terminal.text import shown

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from orchestrator.folders.approvals import Reviewed
    from orchestrator.folders.discovery import ToolFolder
    from orchestrator.jobs.queue import Executor, JobArgs
    from orchestrator.jobs.stalled import Settled
    from orchestrator.jobs.worker import JobWorker
    from orchestrator.runtime import Orchestrator
    from orchestrator.settings import Settings
    from orchestrator.store.engine import Database

STARTED = "worker {name}: {count} folder content(s), {concurrency} job(s) at once; Ctrl-C stops"
STOPPING = "stopping: waiting for {count} running job(s) (Ctrl-C again leaves them to other workers)"
SKIPPED = "[yellow]note:[/yellow] not run here: {key} (content {digest}): not approved in the database"
STALE = (
    "[yellow]note:[/yellow] its copy of {key} changed since it loaded content {digest}: "
    "it takes no more jobs of that content (other workers that hold it do); restart it to load the new copy"
)
RETRYING = "worker: the database at {where} does not answer ({reason}); trying again in {seconds:g} s"
LOST = "lost its connection"  # the reason when procrastinate's worker stopped by itself
FIRST_RETRY_SECONDS = 1.0  # doubled after each failed attempt, up to the next
LAST_RETRY_SECONDS = 30.0
# A job is named by its id (its call's request id, as `jobs show` takes it); the queue's own number follows.
JOB_STARTED = "job {job} of {user} started (queue job {number})"
JOB_ENDED = "job {job} ({name}) {status} (queue job {number})"
GIVEN_BACK = "job {job} given back (queue job {number}): {why}"

ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency", "-c", min=1, max=256, help="Jobs at once (ORCHESTRATOR_WORKER_CONCURRENCY)."
    ),
]
UntilIdleOption = Annotated[
    bool,
    typer.Option(
        "--until-idle", help="Stop after ORCHESTRATOR_WORKER_IDLE_SECONDS with nothing to do."
    ),
]


def worker(concurrency: ConcurrencyOption = None, until_idle: UntilIdleOption = False) -> None:
    """Run background jobs for every user, with the folders approved in the database."""
    settings = settings_or_exit()
    with user_errors():
        if until_idle:
            from orchestrator.jobs.spawn import idle_worker_lock

            with idle_worker_lock(settings.data_dir) as mine:
                if not mine:
                    out.print("another idle-stopping worker runs already")
                    raise typer.Exit(0)
                raise typer.Exit(asyncio.run(_retrying(settings, concurrency, until_idle=True)))
        raise typer.Exit(asyncio.run(_retrying(settings, concurrency, until_idle=False)))


async def _retrying(settings: Settings, concurrency: int | None, *, until_idle: bool) -> int:
    """`_work`, started again while the database does not answer (at the start, or later),
    with a line per attempt and a wait that doubles up to LAST_RETRY_SECONDS; until a signal."""
    from orchestrator.store.engine import database_problem

    stop = asyncio.Event()
    _on_signals(stop.set)
    waits = retry_waits()
    while not stop.is_set():
        try:
            if await _work(settings, concurrency, until_idle=until_idle, stop=stop):
                return 0  # told to stop, or idle
            reason, waits = LOST, retry_waits()  # it ran: the next break starts afresh
        except Exception as error:
            problem = database_problem(error)
            if problem is None:
                raise
            reason = retry_reason(problem)
        if stop.is_set():
            break
        _on_signals(stop.set)  # the worker's own handlers are gone with it
        delay = next(waits)
        where = escape(_address(settings))
        err.print(RETRYING.format(where=where, reason=escape(reason), seconds=delay), highlight=False)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
    return 0


def retry_waits() -> Iterator[float]:
    """The waits between attempts: FIRST_RETRY_SECONDS, doubled each time, up to LAST_RETRY_SECONDS."""
    delay = FIRST_RETRY_SECONDS
    while True:
        yield delay
        delay = min(delay * 2, LAST_RETRY_SECONDS)


def _address(settings: Settings) -> str:
    """HOST:PORT of the database (a socket's directory for HOST), for the retry line."""
    from sqlalchemy.engine import make_url

    if not settings.database_url:
        return "the embedded server"
    url = make_url(settings.database_url)
    host = url.host or url.query.get("host") or "localhost"
    return f"{host if isinstance(host, str) else host[0]}:{url.port or 5432}"


def retry_reason(problem: str) -> str:
    """What the driver said last ("Connection refused"), lower-cased, from a one-line problem."""
    said = problem.rsplit(": ", 1)[-1].strip().rstrip(".")
    return said[:1].lower() + said[1:] if said else "no answer"


async def _work(
    settings: Settings, concurrency: int | None, *, until_idle: bool, stop: asyncio.Event
) -> bool:
    """Take jobs until `stop` is set (or idle); False if the worker stopped by itself first."""
    from orchestrator.jobs.execute import JobExecutor
    from orchestrator.jobs.job import content_queue
    from orchestrator.jobs.queue import JobQueue
    from orchestrator.jobs.trust import record_local_decisions, reviewed_by_database
    from orchestrator.jobs.worker import JobWorker
    from orchestrator.llm.providers import build_chat_model
    from orchestrator.runtime import Orchestrator, use_tool_threads
    from orchestrator.store.requests import OWNER
    from orchestrator.store.storage import Storage

    use_tool_threads()
    storage = await Storage.open(settings, embed_in_background=False)
    runtime: Orchestrator | None = None
    queue = JobQueue(storage.database)
    try:
        await record_local_decisions(storage.database, settings)  # this installation's, if any
        reviewed = await reviewed_by_database(storage.database, settings)
        runtime = await Orchestrator.start(
            settings, reviewed=reviewed, storage=storage, model=build_chat_model(settings)
        )
        folders = [lt.folder for lt in runtime.loaded_folders() if lt.folder.config.mcp is None]
        _skipped_notes(reviewed, {folder.key for folder in folders})
        await queue.open()
        found = {folder.key: folder.digest for folder in _all(reviewed)}
        executor = _Announced(JobExecutor(runtime, found=found, name=OWNER), storage.database)
        queues = [content_queue(folder.digest) for folder in folders]
        worker = JobWorker(
            queue,
            storage.requests,
            settings=settings,
            executor=executor,
            queues=queues,
            concurrency=concurrency,
            on_settled=_settled_notes,
            on_stale=_stale_notes,
        )
        await worker.start()
        err.print(
            STARTED.format(
                name=escape(OWNER), count=len(set(queues)), concurrency=worker.concurrency
            ),
            highlight=False,
        )
        idle = settings.worker_idle_seconds if until_idle else None
        return not await _until_stopped(worker, stop=stop, idle_seconds=idle)
    finally:
        await queue.close()
        if runtime is not None:
            await runtime.close()
        await storage.close(flush_timeout=0)


async def _until_stopped(
    worker: JobWorker, *, stop: asyncio.Event, idle_seconds: float | None
) -> bool:
    """Run until `stop` (a signal; or, with `idle_seconds`, that long with nothing to do), then
    stop; True if the worker stopped by itself first."""
    idle_for = 0.0
    tick = worker.settings.worker_heartbeat_seconds
    signalled = asyncio.ensure_future(stop.wait())
    while not stop.is_set() and not worker.stopped:
        await asyncio.wait({signalled}, timeout=tick)
        if stop.is_set() or await worker.until_stopped(0):
            break
        if idle_seconds is not None:
            busy = worker.running or await worker.waiting_jobs()
            idle_for = 0.0 if busy else idle_for + tick
            if idle_for >= idle_seconds:
                break
    signalled.cancel()
    by_itself = worker.stopped
    if worker.running:
        err.print(STOPPING.format(count=worker.running), highlight=False)
    _on_signals(_leave_now)
    await worker.stop()
    return by_itself


def _on_signals(handler: Callable[[], None]) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # run from a test's thread: signals reach only the main thread
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(number, handler)


def _leave_now() -> None:
    """A second signal: exit at once; the jobs running here are left to the other workers."""
    from orchestrator.store.embedded import leave_embedded_server

    err.print("stopped: running jobs left to the other workers", highlight=False)
    leave_embedded_server()
    os._exit(130)


def _all(reviewed: Reviewed) -> list[ToolFolder]:
    from orchestrator.folders.discovery import walk

    return [node.folder for node in walk(reviewed.tree.nodes)]


def _skipped_notes(reviewed: Reviewed, loaded: set[str]) -> None:
    for folder in _all(reviewed):
        if folder.key not in loaded and folder.config.mcp is None:
            err.print(SKIPPED.format(key=escape(folder.key), digest=folder.digest[:12]), highlight=False)


class _Announced:
    """The executor, with a line as each job starts and ends: what the worker is doing."""

    def __init__(self, executor: Executor, database: Database) -> None:
        self.executor = executor
        self.database = database

    async def stale(self) -> list[ToolFolder]:
        return await self.executor.stale()

    async def run(self, args: JobArgs, *, job_id: int) -> None:
        from orchestrator.jobs.queue import GiveBack
        from orchestrator.store.job_requests import JobRequests

        job, user = escape(args.request_id), escape(shown(args.user_id))
        err.print(JOB_STARTED.format(job=job, user=user, number=job_id), highlight=False)
        status, name, given_back = "ended with an error", "?", None
        try:
            await self.executor.run(args, job_id=job_id)
            calls = await JobRequests(self.database).background_calls(
                user_id=args.user_id, request_id=args.request_id, limit=1
            )
            if calls:
                status, name = calls[0].status, calls[0].call_name
        except GiveBack as back:
            given_back = escape(str(back))
            raise
        except asyncio.CancelledError:
            status = "was cancelled"
            raise
        finally:
            ended = (
                GIVEN_BACK.format(job=job, why=given_back, number=job_id)
                if given_back is not None
                else JOB_ENDED.format(job=job, name=escape(shown(name)), status=status, number=job_id)
            )
            with suppress(OSError):  # the terminal may be gone: the worker goes on
                err.print(ended, highlight=False)


def _stale_notes(folders: list[ToolFolder]) -> None:
    for folder in folders:
        line = STALE.format(key=escape(folder.key), digest=folder.digest[:12])
        with suppress(OSError):  # the terminal may be gone: the worker goes on
            err.print(line, highlight=False)


def _settled_notes(settled: list[Settled]) -> None:
    from orchestrator.jobs.views import settled_line

    for done in settled:
        err.print(f"[dim]{escape(settled_line(done))}[/dim]", highlight=False)
