"""`orchestrator jobs list|show|cancel`: a user's background jobs, across sessions and workers.

A job is a background call (its id is the call's request id), held by the
job queue: queued, running on a worker, or ended. `orchestrator tasks` is the
same group under its old name, kept as a hidden alias. The request log, under the
user's row-level security, says which are the user's; the queue, which only
the owner login reaches, says where each runs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import JsonOption, UserOption, out, settings_or_exit, with_database
from orchestrator.errors import UserError
from orchestrator.terminal.text import one_line, shown
from orchestrator.tools.request_status import RequestStatus

if TYPE_CHECKING:
    from orchestrator.store.engine import Database
    from orchestrator.store.job_requests import BackgroundCall

jobs_app = typer.Typer(no_args_is_help=True, help="Background jobs: list, show and cancel them.")

SessionFilter = Annotated[
    str | None, typer.Option("--session", "-s", help="Only this session's.")
]
JobId = Annotated[str, typer.Argument(help="A job id, or its start (`jobs list` shows them).")]
NONE_YET = "No background jobs of {user}{where}."


@jobs_app.command("list")
def list_jobs(user: UserOption = "local", session: SessionFilter = None, as_json: JsonOption = False) -> None:
    """Your background jobs in every session, oldest first: id, session, tool, status, where,
    and why a queued one waits when no worker holds its folder's content."""
    from orchestrator.jobs.waiting import why_waiting
    from orchestrator.store.job_requests import JobRequests
    from orchestrator.store.queue_schema import upgrade_all

    seconds = settings_or_exit().worker_stalled_seconds

    async def run(database: Database) -> None:
        await upgrade_all(database)
        calls = await JobRequests(database).background_calls(user_id=user, session_id=session)
        queued = [c.job_id for c in calls if c.status == RequestStatus.QUEUED and c.job_id is not None]
        waiting = await why_waiting(database, queued, seconds=seconds)
        if as_json:
            jobs = [{**_json(call), "waiting": waiting.get(call.job_id or 0)} for call in calls]
            print(json.dumps({"jobs": jobs}, ensure_ascii=False))
            return
        if not calls:
            where = f" in session {session}" if session else ""
            out.print(NONE_YET.format(user=user, where=where), markup=False)
        for call in calls:
            out.print(_line(call), highlight=False)
            if (why := waiting.get(call.job_id or 0)) is not None:
                out.print(f"  {escape(why)}", highlight=False)

    with_database(run)


@jobs_app.command("show")
def show_job(job_id: JobId, user: UserOption = "local", as_json: JsonOption = False) -> None:
    """One job: its session, tool, status, where it ran, its result, and each change of state."""
    from orchestrator.cli.request_events import event_line
    from orchestrator.store.queue_schema import upgrade_all
    from orchestrator.store.requests import events_by_request

    async def run(database: Database) -> None:
        await upgrade_all(database)
        call = await _one(database, job_id, user=user)
        events = (await events_by_request(database, [call.request_id], user_id=user)).get(call.request_id, [])
        if as_json:
            body = {**_json(call), "events": [[e.status, e.at.isoformat() if e.at else None, e.detail] for e in events]}
            print(json.dumps(body, ensure_ascii=False))
            return
        out.print(_line(call), highlight=False)
        if call.message:
            out.print(f"  {shown(one_line(call.message))}", highlight=False)
        for event in events:
            out.print(f"    {event_line(event)}", highlight=False)

    with_database(run)


@jobs_app.command("cancel")
def cancel_job(job_id: JobId, user: UserOption = "local") -> None:
    """Cancel a job: a queued one at once, a running one on the worker that runs it."""
    from orchestrator.jobs.queue import JobQueue
    from orchestrator.store.job_requests import JobRequests
    from orchestrator.store.queue_schema import upgrade_all
    from orchestrator.store.requests import RequestLog

    async def run(database: Database) -> None:
        await upgrade_all(database)
        call = await _one(database, job_id, user=user)  # the user's, or no such job
        queue = JobQueue(database)
        await queue.open()
        try:
            outcome = await queue.cancel(call.request_id)
        finally:
            await queue.close()
        if outcome is None:
            raise UserError(f"Job {call.request_id} has ended already ({call.status}).")
        if outcome == "cancelled":  # it was waiting: no worker will record it
            held = await JobRequests(database).load(call.request_id, user_id=user)
            if held is not None:
                await RequestLog(database).cancelled(held.call)
            out.print(f"cancelled job {call.request_id} (it had not started)", highlight=False)
        else:
            out.print(f"cancelling job {call.request_id} on the worker running it", highlight=False)

    with_database(run)


async def _one(database: Database, job_id: str, *, user: str) -> BackgroundCall:
    """The user's job whose id is, or starts with, `job_id`."""
    from orchestrator.store.job_requests import JobRequests

    found = await JobRequests(database).background_calls(user_id=user, request_id=job_id)
    exact = [call for call in found if call.request_id == job_id]
    if exact:
        return exact[0]
    if not found:
        raise UserError(f"No background job {job_id} of user {user}; `orchestrator jobs list` shows them.")
    if len(found) > 1:
        ids = ", ".join(call.request_id for call in found[:5])
        raise UserError(f"{job_id} starts several jobs' ids: {ids}")
    return found[0]


def _line(call: BackgroundCall) -> str:
    running = call.status == RequestStatus.RUNNING and call.ran_on
    status = f"running on {shown(call.ran_on or '')}" if running else call.status
    ended = f", ended {call.updated_at:%Y-%m-%d %H:%M:%S}" if call.status not in (RequestStatus.QUEUED, RequestStatus.RUNNING) else ""
    session = f"session {escape(call.session_id)}  " if call.session_id else ""
    return (
        f"{call.request_id}  {session}{shown(call.call_name)}  {status}  "
        f"(started {call.created_at:%Y-%m-%d %H:%M:%S}{ended})"
    )


def _json(call: BackgroundCall) -> dict[str, object]:
    return {
        "job_id": call.request_id,
        "session_id": call.session_id,
        "tool": call.call_name,
        "status": call.status,
        "queue_job_id": call.job_id,  # the queue's own number for it
        "ran_on": call.ran_on,
        "message": call.message,
        "started": call.created_at.isoformat(),
        "updated": call.updated_at.isoformat(),
        "delivered": call.delivered,
    }

