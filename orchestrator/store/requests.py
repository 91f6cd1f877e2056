"""The request log: every tool call, its parent, and its lifecycle.

    created -> [acknowledged ->] running -> completed | failed | cancelled -> closed

Background calls are acknowledged before they run. A request closes once it
has ended and every request it caused has closed; its parent is then told
and may close in turn. Every change of status is kept in `request_events`.
Each change is one `request_status.TRANSITIONS` allows: a write that the
table refuses (a late end, a call resumed after it ended) changes nothing and
is logged with its reason.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import LiteralString

import psutil
from psycopg.abc import Params
from psycopg.types.json import Jsonb
from sqlalchemy import bindparam, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.plans import PLAN_TOOL
from orchestrator.store.checkpoints import PooledPostgresSaver, Rider
from orchestrator.store.engine import ENTER_SQL, Database, driver_sql
from orchestrator.store.models import request_events, request_usage, requests
from orchestrator.store.text import storable_json, storable_text
from orchestrator.tools.request_log import (
    DECISIONS,
    INTERRUPTED,
    JUDGED,
    Asked,
    CallRecord,
    CallTask,
    PriorCall,
    safely,
)
from orchestrator.tools.request_status import ENDED, RequestStatus, preceding
from orchestrator.tools.results import ToolResult
from orchestrator.usage.records import UsageRecord

logger = logging.getLogger(__name__)

ANONYMOUS = "anonymous"


def process_identity(pid: int | None = None) -> str:
    """`host:pid:start time`, which tells a live process from a new one with the same pid."""
    process = psutil.Process(pid or os.getpid())
    return f"{socket.gethostname()}:{process.pid}:{process.create_time():.0f}"


OWNER = process_identity()


def is_here(owner: str | None) -> bool:
    """Whether `owner` names a process of this machine (whose life this process can see)."""
    host, _, rest = (owner or "").partition(":")
    pid, _, _ = rest.partition(":")
    return host == socket.gethostname() and pid.isdigit()


def has_stopped(owner: str | None, *, silent: bool) -> bool:
    """Whether a worker has stopped: a process of this machine when it is gone, whatever its
    heartbeat says (a busy machine delays heartbeats, not deaths); any other, by `silent`."""
    return not is_alive(owner) if is_here(owner) else silent


def is_alive(owner: str | None) -> bool:
    """Whether the process `owner` names still runs (another host's: assumed so)."""
    if not is_here(owner):
        return True
    pid = (owner or "").split(":")[1]
    try:
        return process_identity(int(pid)) == owner
    except psutil.Error:
        return False


class RequestLog:
    """Records tool calls as the executor and the task manager report them.

    With `checkpoints`, a call that ran in a task of a graph saving with
    them ends in the transaction of that task's checkpoint writes, which hold
    its result.
    """

    def __init__(self, database: Database, *, checkpoints: PooledPostgresSaver | None = None) -> None:
        self.database = database
        self.checkpoints = checkpoints

    async def started(self, call: CallRecord) -> bool:
        """The call is created and runs: its row and its events in one statement.

        False, with nothing written, when the log holds the request already (a
        resumed or recovered call, for `replay.decide` to judge).
        """
        user_id = _user(call)
        statuses = [
            RequestStatus.CREATED,
            *([RequestStatus.ACKNOWLEDGED] if call.background else []),
            RequestStatus.RUNNING,
        ]
        row = {
            "request_id": storable_text(call.request_id),
            "parent_request_id": _text(call.parent_request_id),
            "session_id": _text(call.session_id),
            "user_id": user_id,
            "tool": storable_text(call.tool),
            "action": _text(call.action),
            "call_name": storable_text(call.call_name),
            "parameters": Jsonb(storable_json(call.parameters)),
            "background": call.background,
            "idempotent": call.idempotent,
            "owner": OWNER,
            "status": RequestStatus.RUNNING,
        }
        # An idempotent call may run again: its start need not reach the disk before it
        # runs (its end, which does, takes the start along: the WAL is written in order).
        async with self.database.user_pipeline(user_id, durable=not call.idempotent) as connection:
            cursor = await connection.execute(START_SQL, row | {"statuses": statuses})
        return cursor.rowcount > 0  # none: the log held the request already

    async def acknowledged(self, call: CallRecord, *, detail: str) -> None:
        """An inline call outlived its budget and goes on in the background."""
        async with self.database.user_transaction(_user(call)) as connection:
            await _event(connection, call.request_id, _user(call), RequestStatus.ACKNOWLEDGED, detail)

    async def finished(self, call: CallRecord, result: ToolResult, *, task: CallTask | None = None) -> None:
        """It ended with `result`, which `task`'s checkpoint writes hold (when it ran in one)."""
        outcome = RequestStatus.FAILED if result.status == "failure" else RequestStatus.COMPLETED
        await self._end(call, outcome, result.model_dump(mode="json", exclude_none=True), task=task)

    async def cancelled(self, call: CallRecord) -> None:
        await self._end(call, RequestStatus.CANCELLED, {"message": "cancelled by the user"})

    async def interrupted(self, call: CallRecord) -> None:
        """A stopped process left it running: it failed."""
        await self._end(call, RequestStatus.FAILED, {"message": INTERRUPTED, "error_code": "interrupted"})

    async def requeued(self, call: CallRecord) -> None:
        """A stopped process left it running, and it is safe to run again: this process does."""
        await self._run_here(call, "requeued", INTERRUPTED)

    async def _run_here(self, call: CallRecord, event: str, detail: str | None) -> None:
        user_id = _user(call)
        async with self.database.user_transaction(user_id) as connection:
            if await _move(connection, call.request_id, RequestStatus.RUNNING, owner=OWNER):
                await _event(connection, call.request_id, user_id, event, detail)
                await _event(connection, call.request_id, user_id, RequestStatus.RUNNING)

    async def paused(self, call: CallRecord, *, asked: Sequence[Asked] = ()) -> None:
        """It waits for an answer (a LangGraph interrupt): it runs again when the turn resumes.

        The event's detail holds the questions it asks, `{"asked": [...]}`, if any.
        """
        detail = _json({"asked": list(asked)}) if asked else None
        async with self.database.user_transaction(_user(call)) as connection:
            await _set_status(connection, call.request_id, _user(call), RequestStatus.PAUSED, detail=detail)

    async def decided(
        self,
        request_id: str,
        *,
        user_id: str | None,
        outcome: str,
        detail: Mapping[str, object],
        question: int = 0,
    ) -> None:
        """The person's answer to question `question` of a call: event `outcome`, `detail` as JSON.

        Recorded once: when the call's task runs again it replays the answers
        it had, and those the log holds already (as many as `question` or
        more) are not recorded again.
        """
        user = storable_text(user_id or ANONYMOUS)
        async with self.database.user_transaction(user) as connection:
            earlier = await connection.scalar(
                select(func.count())
                .select_from(request_events)
                .where(
                    request_events.c.request_id == storable_text(request_id),
                    request_events.c.status.in_(DECISIONS),
                )
            )
            if (earlier or 0) > question:
                return
            await _event(connection, request_id, user, outcome, _json(detail))

    async def judged(
        self, request_id: str, *, user_id: str | None, verdict: Mapping[str, object]
    ) -> None:
        """Event `judged` of the agent's call `request_id`: fulfilled or not, and why."""
        user = storable_text(user_id or ANONYMOUS)
        async with self.database.user_transaction(user) as connection:
            await _event(connection, request_id, user, JUDGED, _json(verdict))

    async def resumed(self, call: CallRecord) -> None:
        """A paused call runs again, in this process, now that its answer came."""
        await self._run_here(call, "resumed", None)

    async def prior(self, call: CallRecord) -> PriorCall | None:
        """What the log holds for this call's request id, if anything (a resumed turn)."""
        async with self.database.user_transaction(_user(call)) as connection:
            row = (
                await connection.execute(
                    select(
                        requests.c.status, requests.c.outcome, requests.c.result,
                        requests.c.error, requests.c.owner, requests.c.tool,
                        requests.c.call_name, requests.c.parameters, requests.c.job_id,
                    ).where(requests.c.request_id == storable_text(call.request_id))
                )
            ).first()
        if row is None:
            return None
        return PriorCall(
            status=RequestStatus(row.status),
            outcome=None if row.outcome is None else RequestStatus(row.outcome),
            body=row.result if row.outcome == RequestStatus.COMPLETED else row.error,
            owner_alive=is_alive(row.owner),
            ours=row.owner == OWNER,
            same_call=_same_call(call, tool=row.tool, name=row.call_name, parameters=row.parameters),
            queued=row.job_id is not None,
        )

    async def orphaned(self, *, user_id: str) -> list[CallRecord]:
        """The user's requests still open under a process that no longer runs.

        Not a job's: the job queue finds those whose worker stopped (see `jobs.stalled`).
        """
        async with self.database.user_transaction(user_id) as connection:
            rows = (
                await connection.execute(
                    select(requests).where(
                        requests.c.status.in_((RequestStatus.CREATED, RequestStatus.RUNNING)),
                        requests.c.job_id.is_(None),
                    )
                )
            ).all()
        return [
            CallRecord(
                request_id=row.request_id,
                parent_request_id=row.parent_request_id,
                session_id=row.session_id,
                user_id=row.user_id,
                tool=row.tool,
                action=row.action,
                call_name=row.call_name or row.tool,
                parameters=row.parameters or {},
                background=row.background,
                idempotent=row.idempotent,
            )
            for row in rows
            if not is_alive(row.owner)
        ]

    async def plan_tasks(self, request_ids: Sequence[str], *, user_id: str) -> set[str]:
        """Those of `request_ids` that are tasks of a plan (their parent is a plan call)."""
        if not request_ids:
            return set()
        parents = requests.alias("parents")
        async with self.database.user_transaction(user_id) as connection:
            rows = await connection.execute(
                select(requests.c.request_id)
                .join(parents, parents.c.request_id == requests.c.parent_request_id)
                .where(
                    requests.c.request_id.in_([storable_text(i) for i in request_ids]),
                    parents.c.call_name == PLAN_TOOL,
                )
            )
            return {row.request_id for row in rows}

    async def used(self, record: UsageRecord, *, task: CallTask | None = None) -> None:
        """Keep the tokens and cost of a model call or a billed tool call.

        A model call made in `task` is kept with the task's checkpoint writes,
        which follow (one write transaction a call fewer), as a call's end is.
        """
        user_id = storable_text(record.user_id or ANONYMOUS)
        values = _usage_values(record, user_id=user_id)
        if not await self._ride(task, user_id, USAGE_SQL, values):
            async with self.database.user_transaction(user_id) as connection:
                await connection.exec_driver_sql(USAGE_SQL, values)

    async def _ride(self, task: CallTask | None, user_id: str, sql: LiteralString, values: Params) -> bool:
        """Commit `sql` with `task`'s checkpoint writes, when our checkpointer saves them.

        False when it cannot ride (no task, or another checkpointer): the caller writes it.
        """
        if task is None or self.checkpoints is None or task.checkpointer is not self.checkpoints:
            return False
        entry = (user_id, await self.database.user_token(user_id))
        alone = partial(self._left, user_id, sql, values)
        rider = Rider(task.thread_id, ((ENTER_SQL, entry), (sql, values)), alone)
        self.checkpoints.ride_along(task.task_id, rider)
        return True

    async def _alone(self, user_id: str, sql: LiteralString, values: Params, *, durable: bool) -> int:
        """Run `sql` on its own: the number of rows it returned or changed."""
        async with self.database.user_pipeline(user_id, durable=durable) as connection:
            cursor = await connection.execute(sql, values)
        return cursor.rowcount

    async def _left(self, user_id: str, sql: LiteralString, values: Params) -> None:
        """A rider whose task's writes never took it along: on its own, a failure only logged."""
        await safely(self._alone(user_id, sql, values, durable=False))

    async def _end(
        self,
        call: CallRecord,
        outcome: RequestStatus,
        body: dict[str, object],
        *,
        task: CallTask | None = None,
    ) -> None:
        """The call ended: it closes at once unless a request it caused is still open.

        One statement records the outcome, closes it and logs the events; only
        a parent it closed is looked at further, in the same transaction. A
        call of the top level that ran in `task` ends with the task's writes.
        A call that ended already keeps its first end (see `END_SQL`).
        """
        user_id = _user(call)
        request_id = storable_text(call.request_id)
        stored = storable_json(body)
        ended: dict[str, object] = {
            "request_id": request_id,
            "user_id": user_id,
            "outcome": outcome.value,
            "result": Jsonb(stored) if outcome == RequestStatus.COMPLETED else None,
            "error": None if outcome == RequestStatus.COMPLETED else Jsonb(stored),
            "before": preceding(outcome),
        }
        if call.parent_request_id is None:  # nothing to close above it: one statement
            # A call that ran in a task is saved by the task's durable writes, which follow.
            if await self._ride(task, user_id, END_SQL, ended):
                return
            if not await self._alone(user_id, END_SQL, ended, durable=task is None):
                async with self.database.user_transaction(user_id) as connection:
                    await _refused(connection, request_id, outcome)
            return
        async with self.database.user_transaction(user_id) as connection:
            row = (await connection.exec_driver_sql(END_SQL, ended)).first()
            if row is None:
                await _refused(connection, request_id, outcome)
            elif row.status == RequestStatus.CLOSED and row.parent_request_id is not None:
                await close_if_done(connection, row.parent_request_id, user_id)


USAGE_SQL = driver_sql(
    insert(request_usage).values({name: bindparam(name) for name in (
        "request_id", "parent_request_id", "session_id", "user_id", "turn_id", "kind", "name",
        "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
        "reasoning_tokens", "cost_usd", "credits", "seconds",
    )})
)


def _usage_values(record: UsageRecord, *, user_id: str) -> dict[str, object]:
    tokens = record.tokens
    return {
        "request_id": storable_text(record.request_id),
        "parent_request_id": _text(record.parent_request_id),
        "session_id": _text(record.session_id),
        "user_id": user_id,
        "turn_id": _text(record.turn_id),
        "kind": record.kind,
        "name": storable_text(record.name),
        "input_tokens": tokens.input,
        "output_tokens": tokens.output,
        "cached_input_tokens": tokens.cached_input,
        "cache_write_tokens": tokens.cache_write,
        "reasoning_tokens": tokens.reasoning,
        "cost_usd": record.cost_usd,
        "credits": record.credits,
        "seconds": record.seconds,
    }


# The rule for closing, written once: a request that ended closes when this is false.
# `{request_id}`: the placeholder of the request's id in the statement that uses it.
OPEN_CHILDREN = f"""EXISTS (
    SELECT 1 FROM requests AS children
    WHERE children.parent_request_id = {{request_id}} AND children.status <> '{RequestStatus.CLOSED.value}'
)"""
_OPEN_CHILDREN_OF = text(f"SELECT {OPEN_CHILDREN.format(request_id=':request_id')}")

# The two statements of every call, each one round trip (see `Database.user_pipeline`).
# A new call: its row, and its events in their order (ids follow it); nothing when
# the log holds the request already (a resumed or recovered call).
START_SQL = """
    WITH new AS (
        INSERT INTO requests (
            request_id, parent_request_id, session_id, user_id, tool, action, call_name,
            parameters, background, idempotent, owner, status
        ) VALUES (
            %(request_id)s, %(parent_request_id)s, %(session_id)s, %(user_id)s, %(tool)s,
            %(action)s, %(call_name)s, %(parameters)s, %(background)s, %(idempotent)s,
            %(owner)s, %(status)s
        )
        ON CONFLICT (request_id) DO NOTHING
        RETURNING request_id
    ), logged AS (
        INSERT INTO request_events (request_id, user_id, status)
        SELECT new.request_id, %(user_id)s, event.status
        FROM new, unnest(%(statuses)s::text[]) WITH ORDINALITY AS event (status, position)
        ORDER BY event.position
    )
    SELECT request_id FROM new
"""
# A call ended: its outcome, and closed unless a request it caused is still open;
# the events of both, and the parent told of the closing. Returns (status, parent).
# Only a call whose status an end may follow (`preceding`, as `before`): a call has one
# end, the first (a late second one, from a process that ran on after its call was
# settled as stopped, say, writes nothing).
END_SQL = f"""
    WITH ended AS (
        UPDATE requests SET
            status = CASE WHEN waiting.open THEN %(outcome)s ELSE '{RequestStatus.CLOSED.value}' END,
            outcome = %(outcome)s,
            result = %(result)s,
            error = %(error)s,
            updated_at = now(),
            closed_at = CASE WHEN waiting.open THEN NULL ELSE now() END
        FROM (SELECT {OPEN_CHILDREN.format(request_id="%(request_id)s")} AS open) AS waiting
        WHERE requests.request_id = %(request_id)s AND requests.status = ANY(%(before)s)
        RETURNING requests.status, requests.parent_request_id
    ), logged AS (
        INSERT INTO request_events (request_id, user_id, status, detail)
        SELECT event.request_id, %(user_id)s, event.status, event.detail
        FROM (
            SELECT %(request_id)s AS request_id, %(outcome)s AS status, NULL AS detail, 1 AS position
            FROM ended
            UNION ALL
            SELECT %(request_id)s, '{RequestStatus.CLOSED.value}', NULL, 2
            FROM ended WHERE ended.status = '{RequestStatus.CLOSED.value}'
            UNION ALL
            SELECT ended.parent_request_id, 'notified', %(request_id)s || ' closed', 3
            FROM ended WHERE ended.status = '{RequestStatus.CLOSED.value}' AND ended.parent_request_id IS NOT NULL
        ) AS event
        ORDER BY event.position
    )
    SELECT status, parent_request_id FROM ended
"""


async def close_if_done(connection: AsyncConnection, request_id: str, user_id: str) -> None:
    """Close the request if it ended and all it caused closed; then try its parent."""
    current: str | None = request_id
    while current is not None:
        # Locked: siblings closing at once take turns here, and the last sees all closed.
        row = (
            await connection.execute(
                select(requests.c.status, requests.c.parent_request_id)
                .where(requests.c.request_id == current)
                .with_for_update()
            )
        ).first()
        if row is None or row.status not in ENDED:
            return
        if await connection.scalar(_OPEN_CHILDREN_OF, {"request_id": current}):
            return
        await _set_status(connection, current, user_id, RequestStatus.CLOSED, closed_at=func.now())
        if row.parent_request_id is not None:
            await _event(connection, row.parent_request_id, user_id, "notified", f"{current} closed")
        current = row.parent_request_id


async def _set_status(
    connection: AsyncConnection,
    request_id: str,
    user_id: str,
    status: RequestStatus,
    *,
    detail: str | None = None,
    **columns: object,
) -> None:
    """Move the request to `status`, and log the event, if the transition table allows it."""
    if await _move(connection, request_id, status, **columns):
        await _event(connection, request_id, user_id, status, detail)


async def _move(
    connection: AsyncConnection, request_id: str, status: RequestStatus, **columns: object
) -> bool:
    """Move the request to `status` (with `columns`) if its status now allows it; False: refused."""
    moved = await connection.execute(
        update(requests)
        .where(
            requests.c.request_id == storable_text(request_id),
            requests.c.status.in_(preceding(status)),
        )
        .values(status=status.value, updated_at=func.now(), **columns)
    )
    if moved.rowcount:
        return True
    await _refused(connection, request_id, status)
    return False


async def _refused(connection: AsyncConnection, request_id: str, status: RequestStatus) -> None:
    """Say why the request did not move to `status`: its status now does not allow it."""
    now = await connection.scalar(
        select(requests.c.status).where(requests.c.request_id == storable_text(request_id))
    )
    why = "the log has no such request" if now is None else f"it is {now}, which {status} may not follow"
    logger.info("request %s: %s refused: %s", request_id, status, why)


async def _event(
    connection: AsyncConnection, request_id: str, user_id: str, status: str, detail: str | None = None
) -> None:
    await connection.execute(
        insert(request_events).values(
            request_id=storable_text(request_id),
            user_id=storable_text(user_id),
            status=status,
            detail=_text(detail),
        )
    )


def _json(value: Mapping[str, object]) -> str:
    return json.dumps(storable_json(dict(value)), ensure_ascii=False, default=str)


def _same_call(call: CallRecord, *, tool: str, name: str | None, parameters: object) -> bool:
    """Whether a logged request is `call`: the same tool, name and arguments, as stored."""
    logged = (storable_text(call.tool), storable_text(call.call_name), json.loads(_json(call.parameters)))
    return (tool, name or tool, parameters) == logged


def _text(value: str | None) -> str | None:
    return None if value is None else storable_text(value)


def _user(call: CallRecord) -> str:
    # The row's user and the session's row-level-security user must be the same text.
    return storable_text(call.user_id or ANONYMOUS)


@dataclass(frozen=True)
class RequestNode:
    """A request in a tree, `depth` levels below the one asked for."""

    depth: int
    request_id: str
    parent_request_id: str | None
    tool: str
    action: str | None
    call_name: str | None
    status: str
    outcome: str | None
    parameters: dict[str, object]
    message: str
    created_at: datetime
    updated_at: datetime
    result_handle: str | None = None  # where the whole result is kept, when it was too long

    @property
    def name(self) -> str:
        """The tool as the model, tasks and traces name it (`echo_say`)."""
        return call_name_of(self.call_name, self.tool, self.action)


def call_name_of(call_name: str | None, tool: str, action: str | None) -> str:
    """A logged call's tool as the model named it; `tool.action` for rows from before it was kept."""
    return call_name or (f"{tool}.{action}" if action else tool)


TREE = text(
    """WITH RECURSIVE tree AS (
        SELECT r.*, 0 AS depth, ARRAY[r.created_at] AS path FROM requests r WHERE request_id = :root
        UNION ALL
        SELECT c.*, tree.depth + 1, tree.path || c.created_at
        FROM requests c JOIN tree ON c.parent_request_id = tree.request_id
    )
    SELECT depth, request_id, parent_request_id, tool, action, call_name, status, outcome, parameters,
           COALESCE(result ->> 'message', error ->> 'message', '') AS message, created_at, updated_at,
           COALESCE(result, error) -> 'metadata' ->> 'result_handle' AS result_handle
    FROM tree ORDER BY path"""
)


async def request_tree(database: Database, request_id: str, *, user_id: str) -> list[RequestNode]:
    """The request and everything it caused, depth first; empty if the user has no such request."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(TREE, {"root": request_id})
        return [RequestNode(**row) for row in rows.mappings()]


async def requests_starting(
    database: Database, prefix: str, *, user_id: str, limit: int = 6
) -> list[str]:
    """The ids of the user's requests that are, or start with, `prefix` (the exact one first)."""
    pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(
            select(requests.c.request_id)
            .where(requests.c.request_id.like(pattern, escape="\\"))
            .order_by((requests.c.request_id != prefix), requests.c.request_id)
            .limit(limit)
        )
        return [row.request_id for row in rows]


async def request_history(database: Database, request_id: str, *, user_id: str) -> list[tuple[str, str | None]]:
    """Every status the request went through, in order, with its detail."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(
            select(request_events.c.status, request_events.c.detail)
            .where(request_events.c.request_id == request_id)
            .order_by(request_events.c.id)
        )
        return [(row.status, row.detail) for row in rows]


@dataclass(frozen=True)
class RequestEvent:
    """One change in a request's life: its status, when, and what came with it."""

    status: str
    at: datetime | None
    detail: str | None


async def events_by_request(
    database: Database, request_ids: list[str], *, user_id: str
) -> dict[str, list[RequestEvent]]:
    """Each request's events in the order they happened (only the user's)."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(
            select(
                request_events.c.request_id,
                request_events.c.status,
                request_events.c.at,
                request_events.c.detail,
            )
            .where(request_events.c.request_id.in_(request_ids))
            .order_by(request_events.c.id)
        )
        found: dict[str, list[RequestEvent]] = defaultdict(list)
        for row in rows:
            found[row.request_id].append(RequestEvent(row.status, row.at, row.detail))
    return found
