"""The request log as the job queue sees it: a background call queued, taken, held, delivered.

A background call is a request of the log (see `requests`) and a job of the
queue (schema `job_queue`, see `queue_schema`) with the same request id:

    created -> acknowledged -> queued (job N) -> running (a worker) -> completed | failed -> closed

A call that outlived its inline budget is `held` by the process it runs in
instead of queued. Its end reaches its session once (`delivered`): the first
process to claim it runs the follow-up turn. Every statement here runs in the
user's transaction, under row-level security, and moves a request only as
`request_status.TRANSITIONS` allows (never once it ended).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import LiteralString, cast

from orchestrator.store.engine import Database
from orchestrator.store.requests import ANONYMOUS, OWNER
from orchestrator.store.text import storable_text
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.request_status import RequestStatus, preceding

_RUNNING, _QUEUED = RequestStatus.RUNNING.value, RequestStatus.QUEUED.value

# A worker takes a call: it runs there now, unless it ended (cancelled before it started); the
# call as the log holds it, in the same round trip.
TAKE_SQL = f"""
    WITH moved AS (
        UPDATE requests SET status = '{_RUNNING}', owner = %(owner)s, job_id = %(job_id)s,
            background = true, updated_at = now()
        WHERE request_id = %(request_id)s AND status = ANY(%(before)s)
        RETURNING request_id, parent_request_id, session_id, user_id, tool, action, call_name,
            parameters, background, idempotent, outcome
    ), logged AS (
        INSERT INTO request_events (request_id, user_id, status, detail)
        SELECT request_id, user_id, '{_RUNNING}', %(detail)s FROM moved
    )
    SELECT * FROM moved
"""
# One statement each: the request's new state and its event, only while the transition table
# allows it (`before`: the statuses the new one may follow; never one that ended).
_MOVE = """
    WITH moved AS (
        UPDATE requests SET status = %(status)s, owner = %(owner)s, job_id = %(job_id)s,
            background = true, updated_at = now()
        WHERE request_id = %(request_id)s AND status = ANY(%(before)s) {condition}
        RETURNING request_id
    ), logged AS (
        INSERT INTO request_events (request_id, user_id, status, detail)
        SELECT request_id, %(user_id)s, %(event)s, %(detail)s FROM moved
    )
    SELECT request_id FROM moved
"""
# Queued: unless a worker took it meanwhile (then it is the worker's).
# Only while the handing process holds it and no worker took this job yet: a worker of the
# same process has the same owner, and may take the job before the handover records it.
QUEUED_SQL = _MOVE.format(
    condition="AND owner IS NOT DISTINCT FROM %(was)s AND job_id IS DISTINCT FROM %(job_id)s"
)
ANY_SQL = _MOVE.format(condition="")
CALL_SQL = """
    SELECT request_id, parent_request_id, session_id, user_id, tool, action, call_name,
        parameters, background, idempotent, outcome
    FROM requests WHERE request_id = %(request_id)s
"""
UNDELIVERED_SQL = """
    SELECT request_id, call_name, tool, outcome, result, error, created_at, updated_at
    FROM requests
    WHERE job_id IS NOT NULL AND delivered_at IS NULL AND session_id = %(session_id)s
    ORDER BY updated_at, request_id
"""
CLAIM_SQL = """
    UPDATE requests SET delivered_at = now()
    WHERE request_id = %(request_id)s AND delivered_at IS NULL RETURNING request_id
"""
BACKGROUND_SQL = f"""
    SELECT r.request_id, r.session_id, r.call_name, r.tool, r.status, r.outcome, r.job_id,
        r.owner, r.created_at, r.updated_at, r.delivered_at,
        coalesce(r.result ->> 'message', r.error ->> 'message') AS message,
        (SELECT e.detail FROM request_events e
            WHERE e.request_id = r.request_id AND e.status = '{_RUNNING}'
            ORDER BY e.id DESC LIMIT 1) AS ran_on
    FROM requests r
    WHERE r.job_id IS NOT NULL AND (%(session_id)s::text IS NULL OR r.session_id = %(session_id)s)
        AND (%(request_id)s::text IS NULL OR r.request_id LIKE %(request_id)s || '%%')
    ORDER BY r.created_at, r.request_id
    LIMIT %(limit)s
"""


@dataclass(frozen=True)
class JobCall:
    """A background call as the log holds it: the call, and its outcome once it ended."""

    call: CallRecord
    outcome: RequestStatus | None


@dataclass(frozen=True)
class UndeliveredJob:
    """A job's call whose result has not reached its session: it has not ended, or it has."""

    request_id: str
    call_name: str
    outcome: RequestStatus | None  # None: it has not ended
    body: dict[str, object]  # its result, or its error
    started_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class BackgroundCall:
    """One background call of a user, as `tasks list` and `/tasks` show it."""

    request_id: str
    session_id: str | None
    call_name: str
    status: RequestStatus  # queued, running, or how it ended (completed, failed, cancelled)
    job_id: int | None
    owner: str | None  # the process running it, while it runs
    ran_on: str | None  # the worker that took it last, as its `running` event says
    message: str | None
    created_at: datetime
    updated_at: datetime
    delivered: bool


class JobRequests:
    """The request log's side of the job queue, for one database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def queued(self, call: CallRecord, *, job_id: int) -> bool:
        """The call is a job of the queue now (unless a worker took it first, or it ended).

        Not waiting for the disk: the job is there already, and the worker that
        takes it records the same.
        """
        values = _values(call, job_id=job_id, status=RequestStatus.QUEUED, owner=None, event=_QUEUED)
        values |= {"detail": f"job {job_id}", "was": OWNER}
        return await self._move(QUEUED_SQL, call, values, durable=False)

    async def held(self, call: CallRecord, *, job_id: int) -> bool:
        """The call outlived its budget and goes on here, as job `job_id` of this process."""
        values = _values(call, job_id=job_id, status=RequestStatus.RUNNING, owner=OWNER, event="held")
        return await self._move(ANY_SQL, call, {**values, "detail": f"job {job_id} on {OWNER}"})

    async def take(self, request_id: str, *, user_id: str, job_id: int, worker: str) -> CallRecord | None:
        """A worker runs the call now: the call; None when it ended already (cancelled before
        it started) or the log has no such request.

        Not waiting for the disk: the call's end, which does, takes it along (the
        WAL is written in order), and a job whose worker stops runs again or fails.
        """
        values = {
            "request_id": storable_text(request_id),
            "owner": OWNER,
            "job_id": job_id,
            "detail": worker,
            "before": preceding(RequestStatus.RUNNING),
        }
        async with self.database.user_pipeline(_text(user_id), durable=False) as connection:
            cursor = await connection.execute(TAKE_SQL, values)
        row = await cursor.fetchone()
        return _call(row) if row is not None else None

    async def requeued(self, call: CallRecord, *, job_id: int, detail: str) -> bool:
        """Its worker stopped and it is safe to run again: it waits in the queue once more."""
        values = _values(call, job_id=job_id, status=RequestStatus.QUEUED, owner=None, event="requeued")
        return await self._move(ANY_SQL, call, {**values, "detail": detail})

    async def load(self, request_id: str, *, user_id: str) -> JobCall | None:
        """The call `request_id` of `user_id` as the log holds it (None: no such request)."""
        async with self.database.user_pipeline(_text(user_id)) as connection:
            cursor = await connection.execute(CALL_SQL, {"request_id": storable_text(request_id)})
        row = await cursor.fetchone()
        if row is None:
            return None
        return JobCall(_call(row), _status(row[10]))

    async def undelivered(self, session_id: str, *, user_id: str) -> list[UndeliveredJob]:
        """The session's jobs whose result has not reached it (ended or not), oldest first."""
        async with self.database.user_pipeline(_text(user_id)) as connection:
            cursor = await connection.execute(UNDELIVERED_SQL, {"session_id": storable_text(session_id)})
        return [
            UndeliveredJob(
                request_id=row[0],
                call_name=row[1] or row[2],
                outcome=_status(row[3]),
                body=(row[4] if row[3] == RequestStatus.COMPLETED else row[5]) or {},
                started_at=row[6],
                updated_at=row[7],
            )
            for row in await cursor.fetchall()
        ]

    async def claim_delivery(self, request_id: str, *, user_id: str) -> bool:
        """Take the delivery of a job's result: True for the one process that does."""
        async with self.database.user_pipeline(_text(user_id)) as connection:
            cursor = await connection.execute(CLAIM_SQL, {"request_id": storable_text(request_id)})
        return cursor.rowcount > 0

    async def background_calls(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        request_id: str | None = None,
        limit: int = 200,
    ) -> list[BackgroundCall]:
        """The user's background calls (of one session, or whose id starts with `request_id`)."""
        values = {
            "session_id": session_id,
            "request_id": storable_text(request_id) if request_id else None,
            "limit": limit,
        }
        async with self.database.user_pipeline(_text(user_id)) as connection:
            cursor = await connection.execute(BACKGROUND_SQL, values)
        return [
            BackgroundCall(
                request_id=row[0],
                session_id=row[1],
                call_name=row[2] or row[3],
                status=RequestStatus(row[5] or row[4]),
                job_id=row[6],
                owner=row[7],
                ran_on=row[12],
                message=row[11],
                created_at=row[8],
                updated_at=row[9],
                delivered=row[10] is not None,
            )
            for row in await cursor.fetchall()
        ]

    async def _move(
        self, sql: LiteralString, call: CallRecord, values: dict[str, object], *, durable: bool = True
    ) -> bool:
        async with self.database.user_pipeline(_user(call), durable=durable) as connection:
            cursor = await connection.execute(sql, values)
        return cursor.rowcount > 0


def _call(row: Sequence[object]) -> CallRecord:
    """A row of CALL_SQL or TAKE_SQL as the call it holds."""
    (request_id, parent, session, user, tool, action, name, parameters, background,
     idempotent, _) = row
    return CallRecord(
        request_id=str(request_id),
        parent_request_id=_maybe(parent),
        session_id=_maybe(session),
        user_id=_maybe(user),
        tool=str(tool),
        action=_maybe(action),
        call_name=str(name or tool),
        # psycopg reads a jsonb object as a dict whose keys are text
        parameters=cast(dict[str, object], parameters) if isinstance(parameters, dict) else {},
        background=bool(background),
        idempotent=bool(idempotent),
    )


def _maybe(value: object) -> str | None:
    return None if value is None else str(value)


def _status(value: object) -> RequestStatus | None:
    return None if value is None else RequestStatus(value)


def _values(
    call: CallRecord, *, job_id: int, status: RequestStatus, owner: str | None, event: str
) -> dict[str, object]:
    return {
        "request_id": storable_text(call.request_id),
        "user_id": _user(call),
        "job_id": job_id,
        "status": status.value,
        "before": preceding(status),
        "owner": owner,
        "event": event,
    }


def _user(call: CallRecord) -> str:
    return _text(call.user_id or ANONYMOUS)


def _text(value: str) -> str:
    return storable_text(value)

