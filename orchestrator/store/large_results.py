"""Tool results too long for the model, kept whole per user under a handle until they expire.

The model reads a result's first `max_tool_result_chars` and its handle
(`result:<hex>`), and the rest by range or search (`sources.result_reader`).
Rows are under row-level security: a user's transaction sees only their own,
so another user's handle is as unknown as one never given. At most
`large_result_max_bytes` of a result is kept (the rest is dropped, and the
model is told); a result can be read for `large_result_days`, and each write
purges the user's expired ones.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.settings import Settings
from orchestrator.store.models import large_results
from orchestrator.store.text import storable_text

HANDLE_PREFIX = "result:"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_DAYS = 7.0


@dataclass(frozen=True)
class KeepLimits:
    """How much of one result is kept (UTF-8 bytes), and for how many days."""

    max_bytes: int = DEFAULT_MAX_BYTES
    days: float = DEFAULT_DAYS

    @classmethod
    def of(cls, settings: Settings) -> KeepLimits:
        """ORCHESTRATOR_LARGE_RESULT_MAX_BYTES and ORCHESTRATOR_LARGE_RESULT_DAYS."""
        return cls(max_bytes=settings.large_result_max_bytes, days=settings.large_result_days)


@dataclass(frozen=True)
class KeptResult:
    """A result as it was kept: its handle, its whole length, and how much of it is held."""

    handle: str
    total_chars: int
    kept_chars: int


@dataclass(frozen=True)
class ResultText:
    """Part of a kept result from `offset` on, with what is known of the whole."""

    text: str
    offset: int
    total_chars: int
    kept_chars: int


async def keep_result(
    connection: AsyncConnection,
    text: str,
    *,
    user_id: str,
    request_id: str | None,
    limits: KeepLimits,
) -> KeptResult:
    """Keep `text` for `user_id` (in a transaction of theirs); the user's expired results go."""
    await connection.execute(delete(large_results).where(large_results.c.expires_at <= func.now()))
    kept = within_bytes(storable_text(text), limits.max_bytes)
    handle = f"{HANDLE_PREFIX}{uuid.uuid4().hex}"
    await connection.execute(
        insert(large_results).values(
            handle=handle,
            user_id=user_id,
            request_id=request_id,
            content=kept,
            total_chars=len(text),
            kept_chars=len(kept),
            expires_at=func.now() + timedelta(days=limits.days),
        )
    )
    return KeptResult(handle=handle, total_chars=len(text), kept_chars=len(kept))


async def read_result(
    connection: AsyncConnection, handle: str, *, offset: int, length: int | None = None
) -> ResultText | None:
    """`length` characters (all, when None) of the result `handle` from `offset` (0-based).

    None when the user of the transaction has no such result, or it expired.
    """
    start = offset + 1  # SQL counts characters from 1
    part = (
        func.substr(large_results.c.content, start)
        if length is None
        else func.substr(large_results.c.content, start, length)
    )
    row = (
        await connection.execute(
            select(part, large_results.c.total_chars, large_results.c.kept_chars).where(
                large_results.c.handle == handle, large_results.c.expires_at > func.now()
            )
        )
    ).first()
    if row is None:
        return None
    text, total, kept = row
    return ResultText(text=str(text), offset=offset, total_chars=int(total), kept_chars=int(kept))


def within_bytes(text: str, max_bytes: int) -> str:
    """The longest start of `text` whose UTF-8 is at most `max_bytes` (whole characters only)."""
    encoded = text.encode("utf-8", errors="surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")
