"""The result cache's table: one user's reusable results, keyed by folder content, call and arguments.

Every statement runs in a transaction of the user's (row-level security): a
user reads, writes and purges only their own entries. An entry is reused only
while the folder's approved content is the one it was made with and until it
expires; a miss purges the user's entries of the folder that can no longer be
reused (another content, or expired), and each start of the storage sweeps
every user's expired entries: an entry outlives neither its ttl nor, for its
user, a change of its folder. A hit is an event of the request log
(`cache_hit`), written in the transaction that found it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, insert, or_, select
from sqlalchemy.dialects.postgresql import insert as upsert
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.engine import Database
from orchestrator.store.models import request_events, result_cache
from orchestrator.store.text import storable_json, storable_text

CACHE_HIT = "cache_hit"  # the request log's event of a call answered from the cache
_C = result_cache.c


@dataclass(frozen=True)
class CacheKey:
    """What a result is reused for: the folder as approved, the call and its arguments' hash."""

    folder: str
    content: str
    call_name: str
    arguments: str


@dataclass(frozen=True)
class CachedResult:
    """A reusable result: the call that made it, and when it was made and expires."""

    result: dict[str, object]
    request_id: str
    created_at: datetime
    expires_at: datetime


async def cached(
    connection: AsyncConnection, key: CacheKey, *, user_id: str, now: datetime
) -> CachedResult | None:
    """The user's entry for `key` that has not expired at `now`; on a miss, the stale purged."""
    row = (
        await connection.execute(
            select(_C.result, _C.request_id, _C.created_at, _C.expires_at).where(
                _C.user_id == user_id,
                _C.folder == key.folder,
                _C.call_name == key.call_name,
                _C.arguments == key.arguments,
                _C.content == key.content,
                _C.expires_at > now,
            )
        )
    ).one_or_none()
    if row is None:
        await _purge_stale(connection, key, user_id=user_id, now=now)
        return None
    return CachedResult(dict(row.result), row.request_id, row.created_at, row.expires_at)


async def keep(
    connection: AsyncConnection,
    key: CacheKey,
    result: dict[str, object],
    *,
    user_id: str,
    request_id: str,
    now: datetime,
    ttl_seconds: int,
) -> None:
    """Keep `result` of the call `request_id` for `key` until `ttl_seconds` after `now`."""
    values = {
        "result": storable_json(result),
        "content": key.content,
        "request_id": storable_text(request_id),
        "created_at": now,
        "expires_at": now + timedelta(seconds=ttl_seconds),
    }
    statement = upsert(result_cache).values(
        user_id=user_id,
        folder=key.folder,
        call_name=key.call_name,
        arguments=key.arguments,
        **values,
    )
    await connection.execute(
        statement.on_conflict_do_update(index_elements=list(result_cache.primary_key), set_=values)
    )


async def record_hit(
    connection: AsyncConnection, request_id: str, hit: CachedResult, *, user_id: str
) -> None:
    """The request log's `cache_hit` event of the call `request_id`: whose result, kept when."""
    detail = {
        "from_request": hit.request_id,
        "cached_at": hit.created_at.isoformat(timespec="seconds"),
        "expires_at": hit.expires_at.isoformat(timespec="seconds"),
    }
    await connection.execute(
        insert(request_events).values(
            request_id=storable_text(request_id),
            user_id=user_id,
            status=CACHE_HIT,
            detail=json.dumps(detail),
        )
    )


async def _purge_stale(
    connection: AsyncConnection, key: CacheKey, *, user_id: str, now: datetime
) -> None:
    await connection.execute(
        delete(result_cache).where(
            _C.user_id == user_id,
            _C.folder == key.folder,
            or_(_C.content != key.content, _C.expires_at <= now),
        )
    )


async def sweep_expired(database: Database) -> int:
    """Delete every user's expired entries (as the owner: maintenance); how many there were."""
    async with database.admin_transaction() as connection:
        swept = await connection.execute(delete(result_cache).where(_C.expires_at <= func.now()))
    return swept.rowcount
