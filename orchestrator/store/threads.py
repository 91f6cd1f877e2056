"""A user's threads as `orchestrator serve` offers them: sessions, with a client's metadata.

A thread is a session (its id is the session id, the checkpointer's thread):
created empty by a client, or by a first turn. Row-level security shows a user
their own only, so another user's thread is simply not found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import JsonValue
from sqlalchemy import text
from sqlalchemy.engine import Row

from orchestrator.store.engine import Database

Metadata = Mapping[str, JsonValue]

CREATE = text(
    """
    INSERT INTO sessions (session_id, user_id, metadata) VALUES (:thread_id, :user_id, :metadata)
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id, metadata, created_at, updated_at
    """
)
ONE = text("SELECT session_id, metadata, created_at, updated_at FROM sessions WHERE session_id = :thread_id")
# `@>`: every key and value the client filters by (an empty filter matches every thread).
SEARCH = text(
    """
    SELECT session_id, metadata, created_at, updated_at FROM sessions
    WHERE metadata @> :metadata
    ORDER BY updated_at DESC, session_id LIMIT :limit OFFSET :offset
    """
)
UPDATE = text(
    """
    UPDATE sessions SET metadata = metadata || :metadata, updated_at = now()
    WHERE session_id = :thread_id
    RETURNING session_id, metadata, created_at, updated_at
    """
)
DELETE = text("DELETE FROM sessions WHERE session_id = :thread_id RETURNING session_id")


@dataclass(frozen=True)
class ThreadRow:
    """A thread as stored: its id, the client's metadata, when it was made and last changed."""

    thread_id: str
    metadata: dict[str, JsonValue]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Row[Any]) -> ThreadRow:  # a `text()` query's row: its columns as above
        return cls(row.session_id, row.metadata, row.created_at, row.updated_at)


async def create_thread(
    database: Database, thread_id: str, *, user_id: str, metadata: Metadata | None = None
) -> ThreadRow | None:
    """Make the user's thread `thread_id`; None if the id is taken (theirs or another's)."""
    values = {"thread_id": thread_id, "user_id": user_id, "metadata": json.dumps(metadata or {})}
    async with database.user_transaction(user_id) as connection:
        row = (await connection.execute(CREATE, values)).first()
    return ThreadRow.of(row) if row is not None else None


async def get_thread(database: Database, thread_id: str, *, user_id: str) -> ThreadRow | None:
    """The user's thread `thread_id`, or None: there is none, or it is another user's."""
    async with database.user_transaction(user_id) as connection:
        row = (await connection.execute(ONE, {"thread_id": thread_id})).first()
    return ThreadRow.of(row) if row is not None else None


async def search_threads(
    database: Database, *, user_id: str, metadata: Metadata | None = None, limit: int = 10, offset: int = 0
) -> list[ThreadRow]:
    """The user's threads whose metadata holds `metadata`, the latest changed first."""
    values = {"metadata": json.dumps(metadata or {}), "limit": limit, "offset": offset}
    async with database.user_transaction(user_id) as connection:
        rows = (await connection.execute(SEARCH, values)).all()
    return [ThreadRow.of(row) for row in rows]


async def update_thread(
    database: Database, thread_id: str, *, user_id: str, metadata: Metadata
) -> ThreadRow | None:
    """Merge `metadata` into the user's thread's; None when it is not theirs."""
    values = {"thread_id": thread_id, "metadata": json.dumps(metadata)}
    async with database.user_transaction(user_id) as connection:
        row = (await connection.execute(UPDATE, values)).first()
    return ThreadRow.of(row) if row is not None else None


async def delete_thread(database: Database, thread_id: str, *, user_id: str) -> bool:
    """Delete the user's thread with its messages and runs; False when it is not theirs.

    Its checkpoints are the checkpointer's to delete (`adelete_thread`), after this.
    """
    async with database.user_transaction(user_id) as connection:
        return (await connection.execute(DELETE, {"thread_id": thread_id})).first() is not None
