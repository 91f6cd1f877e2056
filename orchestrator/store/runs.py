"""The runs `orchestrator serve` was asked for: one turn of a thread each, and how it ended.

Kept so that a client can read a run after it ended, and so that a server
killed mid-run finds, once restarted, the runs it left (`unsettled_runs`, across
users: the owner's login) and settles each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from psycopg import AsyncCursor
from psycopg.types.json import Jsonb
from pydantic import JsonValue
from sqlalchemy import text

from orchestrator.store.engine import Database

RunStatus = Literal["pending", "running", "success", "error", "interrupted"]
MultitaskStrategy = Literal["reject", "enqueue", "interrupt"]
SETTLED: frozenset[RunStatus] = frozenset({"success", "error", "interrupted"})

COLUMNS = (
    "run_id, thread_id, user_id, assistant_id, status, metadata, error, created_at, updated_at, "
    "multitask_strategy"
)
CREATE = f"""
    INSERT INTO runs (run_id, thread_id, user_id, assistant_id, status, metadata, multitask_strategy)
    VALUES (%(run_id)s, %(thread_id)s, %(user_id)s, %(assistant_id)s, 'pending', %(metadata)s, %(strategy)s)
    RETURNING {COLUMNS}
"""
SET_STATUS = """
    WITH run AS (
        UPDATE runs SET status = %(status)s, error = %(error)s, updated_at = now()
        WHERE run_id = %(run_id)s RETURNING thread_id
    )
    UPDATE sessions SET updated_at = now() WHERE session_id = (SELECT thread_id FROM run)
"""
ONE = f"SELECT {COLUMNS} FROM runs WHERE run_id = %(run_id)s AND thread_id = %(thread_id)s"
OF_THREAD = (
    f"SELECT {COLUMNS} FROM runs WHERE thread_id = %(thread_id)s "
    "ORDER BY created_at DESC, run_id LIMIT %(limit)s OFFSET %(offset)s"
)
UNSETTLED = text(f"SELECT {COLUMNS} FROM runs WHERE status IN ('pending', 'running') ORDER BY created_at")


@dataclass(frozen=True)
class RunRow:
    """A run as stored."""

    run_id: str
    thread_id: str
    user_id: str
    assistant_id: str
    status: RunStatus
    metadata: dict[str, JsonValue]
    error: str | None
    created_at: datetime
    updated_at: datetime
    multitask_strategy: MultitaskStrategy

    @classmethod
    def of(cls, row: Sequence[Any]) -> RunRow:  # COLUMNS, in order
        return cls(*row)


async def create_run(
    database: Database,
    run_id: str,
    *,
    thread_id: str,
    user_id: str,
    assistant_id: str,
    metadata: Mapping[str, JsonValue] | None = None,
    multitask_strategy: MultitaskStrategy = "reject",
) -> RunRow:
    """Record a new run of the user's thread, pending."""
    values = {
        "run_id": run_id,
        "thread_id": thread_id,
        "user_id": user_id,
        "assistant_id": assistant_id,
        "metadata": Jsonb(metadata or {}),
        "strategy": multitask_strategy,
    }
    async with database.user_pipeline(user_id) as connection:
        made = await connection.execute(CREATE, values)
    return RunRow.of(await _fetched(made))


async def set_run_status(
    database: Database, run_id: str, *, user_id: str, status: RunStatus, error: str | None = None
) -> None:
    """Say how the user's run stands now (its thread changed with it).

    `running` does not wait for the disk: lost in a crash, the run is still
    `pending`, which the next start settles as it would a running one.
    """
    values = {"run_id": run_id, "status": status, "error": error}
    async with database.user_pipeline(user_id, durable=status != "running") as connection:
        await connection.execute(SET_STATUS, values)


async def get_run(database: Database, run_id: str, *, thread_id: str, user_id: str) -> RunRow | None:
    """The user's run `run_id` of `thread_id`, or None: there is none, or it is another user's."""
    async with database.user_pipeline(user_id) as connection:
        found = await connection.execute(ONE, {"run_id": run_id, "thread_id": thread_id})
    row = await found.fetchone()
    return RunRow.of(row) if row is not None else None


async def thread_runs(
    database: Database, thread_id: str, *, user_id: str, limit: int = 10, offset: int = 0
) -> list[RunRow]:
    """The user's runs of `thread_id`, the newest first."""
    values = {"thread_id": thread_id, "limit": limit, "offset": offset}
    async with database.user_pipeline(user_id) as connection:
        found = await connection.execute(OF_THREAD, values)
    return [RunRow.of(row) for row in await found.fetchall()]


async def _fetched(cursor: AsyncCursor[tuple[Any, ...]]) -> tuple[Any, ...]:
    row = await cursor.fetchone()
    assert row is not None  # INSERT ... RETURNING returns its row
    return row


async def unsettled_runs(database: Database) -> list[RunRow]:
    """Every user's runs still pending or running: at a server's start, those a stopped one left."""
    async with database.admin_transaction() as connection:
        rows = (await connection.execute(UNSETTLED)).all()
    return [RunRow.of(row) for row in rows]
