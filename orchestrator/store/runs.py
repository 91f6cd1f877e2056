"""The runs `orchestrator serve` was asked for: one turn of a thread each, and how it ended.

Kept so that a client can read a run after it ended, and so that a server
killed mid-run finds, once restarted, the runs it left (`unsettled_runs`, across
users: the owner's login) and settles each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import JsonValue
from sqlalchemy import text
from sqlalchemy.engine import Row

from orchestrator.store.engine import Database

RunStatus = Literal["pending", "running", "success", "error", "interrupted"]
SETTLED: frozenset[RunStatus] = frozenset({"success", "error", "interrupted"})

COLUMNS = "run_id, thread_id, user_id, assistant_id, status, metadata, error, created_at, updated_at"
CREATE = text(
    f"""
    INSERT INTO runs (run_id, thread_id, user_id, assistant_id, status, metadata)
    VALUES (:run_id, :thread_id, :user_id, :assistant_id, 'pending', :metadata)
    RETURNING {COLUMNS}
    """
)
SET_STATUS = text(
    """
    WITH run AS (
        UPDATE runs SET status = :status, error = :error, updated_at = now()
        WHERE run_id = :run_id RETURNING thread_id
    )
    UPDATE sessions SET updated_at = now() WHERE session_id = (SELECT thread_id FROM run)
    """
)
ONE = text(f"SELECT {COLUMNS} FROM runs WHERE run_id = :run_id AND thread_id = :thread_id")
OF_THREAD = text(
    f"SELECT {COLUMNS} FROM runs WHERE thread_id = :thread_id "
    "ORDER BY created_at DESC, run_id LIMIT :limit OFFSET :offset"
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

    @classmethod
    def of(cls, row: Row[Any]) -> RunRow:  # a `text()` query's row, of COLUMNS
        return cls(
            row.run_id, row.thread_id, row.user_id, row.assistant_id, row.status,
            row.metadata, row.error, row.created_at, row.updated_at,
        )


async def create_run(
    database: Database,
    run_id: str,
    *,
    thread_id: str,
    user_id: str,
    assistant_id: str,
    metadata: Mapping[str, JsonValue] | None = None,
) -> RunRow:
    """Record a new run of the user's thread, pending."""
    values = {
        "run_id": run_id,
        "thread_id": thread_id,
        "user_id": user_id,
        "assistant_id": assistant_id,
        "metadata": json.dumps(metadata or {}),
    }
    async with database.user_transaction(user_id) as connection:
        return RunRow.of((await connection.execute(CREATE, values)).one())


async def set_run_status(
    database: Database, run_id: str, *, user_id: str, status: RunStatus, error: str | None = None
) -> None:
    """Say how the user's run stands now (its thread changed with it)."""
    values = {"run_id": run_id, "status": status, "error": error}
    async with database.user_transaction(user_id) as connection:
        await connection.execute(SET_STATUS, values)


async def get_run(database: Database, run_id: str, *, thread_id: str, user_id: str) -> RunRow | None:
    """The user's run `run_id` of `thread_id`, or None: there is none, or it is another user's."""
    async with database.user_transaction(user_id) as connection:
        row = (await connection.execute(ONE, {"run_id": run_id, "thread_id": thread_id})).first()
    return RunRow.of(row) if row is not None else None


async def thread_runs(
    database: Database, thread_id: str, *, user_id: str, limit: int = 10, offset: int = 0
) -> list[RunRow]:
    """The user's runs of `thread_id`, the newest first."""
    values = {"thread_id": thread_id, "limit": limit, "offset": offset}
    async with database.user_transaction(user_id) as connection:
        rows = (await connection.execute(OF_THREAD, values)).all()
    return [RunRow.of(row) for row in rows]


async def unsettled_runs(database: Database) -> list[RunRow]:
    """Every user's runs still pending or running: at a server's start, those a stopped one left."""
    async with database.admin_transaction() as connection:
        rows = (await connection.execute(UNSETTLED)).all()
    return [RunRow.of(row) for row in rows]
