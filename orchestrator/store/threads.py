"""A user's threads as `orchestrator serve` offers them: sessions, with a client's metadata.

A thread is a session (its id is the session id, the checkpointer's thread):
created empty by a client, or by a first turn. Row-level security shows a user
their own only, so another user's thread is simply not found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString

from psycopg.types.json import Jsonb
from pydantic import JsonValue

from orchestrator.store.engine import Database

Metadata = Mapping[str, JsonValue]

COLUMNS = "session_id, metadata, created_at, updated_at"
CREATE = f"""
    INSERT INTO sessions (session_id, user_id, metadata) VALUES (%(thread_id)s, %(user_id)s, %(metadata)s)
    ON CONFLICT (session_id) DO NOTHING RETURNING {COLUMNS}
"""
ONE = f"SELECT {COLUMNS} FROM sessions WHERE session_id = %(thread_id)s"
# `@>`: every key and value the client filters by (an empty filter matches every thread).
SEARCH = f"""
    SELECT {COLUMNS} FROM sessions WHERE metadata @> %(metadata)s
    ORDER BY updated_at DESC, session_id LIMIT %(limit)s OFFSET %(offset)s
"""
UPDATE = f"""
    UPDATE sessions SET metadata = metadata || %(metadata)s, updated_at = now()
    WHERE session_id = %(thread_id)s RETURNING {COLUMNS}
"""
DELETE = "DELETE FROM sessions WHERE session_id = %(thread_id)s RETURNING session_id"


@dataclass(frozen=True)
class ThreadRow:
    """A thread as stored: its id, the client's metadata, when it was made and last changed."""

    thread_id: str
    metadata: dict[str, JsonValue]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> ThreadRow:  # COLUMNS, in order
        session_id, metadata, created_at, updated_at = row
        return cls(session_id, metadata, created_at, updated_at)


async def create_thread(
    database: Database, thread_id: str, *, user_id: str, metadata: Metadata | None = None
) -> ThreadRow | None:
    """Make the user's thread `thread_id`; None if the id is taken (theirs or another's)."""
    values = {"thread_id": thread_id, "user_id": user_id, "metadata": Jsonb(metadata or {})}
    return await _one(database, CREATE, values, user_id=user_id)


async def get_thread(database: Database, thread_id: str, *, user_id: str) -> ThreadRow | None:
    """The user's thread `thread_id`, or None: there is none, or it is another user's."""
    return await _one(database, ONE, {"thread_id": thread_id}, user_id=user_id)


async def search_threads(
    database: Database, *, user_id: str, metadata: Metadata | None = None, limit: int = 10, offset: int = 0
) -> list[ThreadRow]:
    """The user's threads whose metadata holds `metadata`, the latest changed first."""
    values = {"metadata": Jsonb(metadata or {}), "limit": limit, "offset": offset}
    async with database.user_pipeline(user_id) as connection:
        found = await connection.execute(SEARCH, values)
    return [ThreadRow.of(row) for row in await found.fetchall()]


async def update_thread(
    database: Database, thread_id: str, *, user_id: str, metadata: Metadata
) -> ThreadRow | None:
    """Merge `metadata` into the user's thread's; None when it is not theirs."""
    values = {"thread_id": thread_id, "metadata": Jsonb(metadata)}
    return await _one(database, UPDATE, values, user_id=user_id)


async def delete_thread(database: Database, thread_id: str, *, user_id: str) -> bool:
    """Delete the user's thread with its messages and runs; False when it is not theirs.

    Its checkpoints are the checkpointer's to delete (`adelete_thread`), after this.
    """
    async with database.user_pipeline(user_id) as connection:
        deleted = await connection.execute(DELETE, {"thread_id": thread_id})
    return await deleted.fetchone() is not None


async def _one(
    database: Database, statement: LiteralString, values: Mapping[str, object], *, user_id: str
) -> ThreadRow | None:
    """One round trip as the user (see `Database.user_pipeline`): the row it returned, if any."""
    async with database.user_pipeline(user_id) as connection:
        cursor = await connection.execute(statement, values)
    row = await cursor.fetchone()
    return ThreadRow.of(row) if row is not None else None
