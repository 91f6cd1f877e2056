"""`orchestrator tasks list|show|cancel`: a user's background tasks, across sessions and workers.

A task is a background call (its id is the call's request id), held by the
job queue: queued, running on a worker, or ended. The request log, under the
user's row-level security, says which are the user's; the queue, which only
the owner login reaches, says where each runs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import JsonOption, UserOption, out, with_database
from orchestrator.errors import UserError
from orchestrator.terminal.text import one_line, shown
from orchestrator.tools.request_status import RequestStatus

if TYPE_CHECKING:
    from orchestrator.store.engine import Database
    from orchestrator.store.job_requests import BackgroundCall

tasks_app = typer.Typer(no_args_is_help=True, help="Background tasks: list, show and cancel them.")

SessionFilter = Annotated[
    str | None, typer.Option("--session", "-s", help="Only this session's.")
]
TaskId = Annotated[str, typer.Argument(help="A task id, or its start (`tasks list` shows them).")]
NONE_YET = "No background tasks of {user}{where}."


@tasks_app.command("list")
def list_tasks(user: UserOption = "local", session: SessionFilter = None, as_json: JsonOption = False) -> None:
    """Your background tasks in every session, oldest first: id, session, tool, status, where."""
    from orchestrator.store.job_requests import JobRequests
    from orchestrator.store.queue_schema import upgrade_all

    async def run(database: Database) -> None:
        await upgrade_all(database)
        calls = await JobRequests(database).background_calls(user_id=user, session_id=session)
        if as_json:
            print(json.dumps({"tasks": [_json(call) for call in calls]}, ensure_ascii=False))
            return
        if not calls:
            where = f" in session {session}" if session else ""
            out.print(NONE_YET.format(user=user, where=where), markup=False)
        for call in calls:
            out.print(_line(call), highlight=False)

    with_database(run)


@tasks_app.command("show")
def show_task(task_id: TaskId, user: UserOption = "local", as_json: JsonOption = False) -> None:
    """One task: its session, tool, status, where it ran, its result, and each change of state."""
    from orchestrator.cli.request_events import event_line
    from orchestrator.store.queue_schema import upgrade_all
    from orchestrator.store.requests import events_by_request

    async def run(database: Database) -> None:
        await upgrade_all(database)
        call = await _one(database, task_id, user=user)
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


@tasks_app.command("cancel")
def cancel_task(task_id: TaskId, user: UserOption = "local") -> None:
    """Cancel a task: a queued one at once, a running one on the worker that runs it."""
    from orchestrator.jobs.queue import JobQueue
    from orchestrator.store.job_requests import JobRequests
    from orchestrator.store.queue_schema import upgrade_all
    from orchestrator.store.requests import RequestLog

    async def run(database: Database) -> None:
        await upgrade_all(database)
        call = await _one(database, task_id, user=user)  # the user's, or no such task
        queue = JobQueue(database)
        await queue.open()
        try:
            outcome = await queue.cancel(call.request_id)
        finally:
            await queue.close()
        if outcome is None:
            raise UserError(f"Task {call.request_id} has ended already ({call.status}).")
        if outcome == "cancelled":  # it was waiting: no worker will record it
            held = await JobRequests(database).load(call.request_id, user_id=user)
            if held is not None:
                await RequestLog(database).cancelled(held.call)
            out.print(f"cancelled task {call.request_id} (it had not started)", highlight=False)
        else:
            out.print(f"cancelling task {call.request_id} on the worker running it", highlight=False)

    with_database(run)


async def _one(database: Database, task_id: str, *, user: str) -> BackgroundCall:
    """The user's task whose id is, or starts with, `task_id`."""
    from orchestrator.store.job_requests import JobRequests

    found = await JobRequests(database).background_calls(user_id=user, request_id=task_id)
    exact = [call for call in found if call.request_id == task_id]
    if exact:
        return exact[0]
    if not found:
        raise UserError(f"No background task {task_id} of user {user}; `orchestrator tasks list` shows them.")
    if len(found) > 1:
        ids = ", ".join(call.request_id for call in found[:5])
        raise UserError(f"{task_id} starts several tasks' ids: {ids}")
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
        "task_id": call.request_id,
        "session_id": call.session_id,
        "tool": call.call_name,
        "status": call.status,
        "job_id": call.job_id,
        "ran_on": call.ran_on,
        "message": call.message,
        "started": call.created_at.isoformat(),
        "updated": call.updated_at.isoformat(),
        "delivered": call.delivered,
    }

