"""The user's requests at the top of their trees, newest first (`orchestrator requests list`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from orchestrator.store.engine import Database
from orchestrator.store.requests import call_name_of

LIST = text(
    """SELECT request_id, session_id, tool, action, call_name, status, outcome, created_at,
        updated_at
    FROM requests
    WHERE parent_request_id IS NULL
      AND (CAST(:session AS text) IS NULL OR session_id = :session)
      AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)
    ORDER BY created_at DESC LIMIT :limit"""
)


@dataclass(frozen=True)
class ListedRequest:
    """One top-level request: its id, session, tool and action, state, and times."""

    request_id: str
    session_id: str | None
    tool: str
    action: str | None
    call_name: str | None
    status: str
    outcome: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def name(self) -> str:
        """The tool as the model, tasks and traces name it (`echo_say`)."""
        return call_name_of(self.call_name, self.tool, self.action)

    @property
    def seconds(self) -> float:
        """How long it took (so far)."""
        return max(0.0, (self.updated_at - self.created_at).total_seconds())


async def recent_requests(
    database: Database,
    *,
    user_id: str,
    session_id: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
) -> list[ListedRequest]:
    """The user's top-level requests (of one session, since a time), the newest first."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(
            LIST, {"session": session_id, "since": since, "limit": limit}
        )
        return [ListedRequest(**row) for row in rows.mappings()]


PAUSED = text(
    """SELECT request_id, session_id FROM requests
    WHERE status = 'paused' AND session_id IS NOT NULL
      AND (call_name = :name OR (call_name IS NULL AND tool = :name))
    ORDER BY created_at LIMIT :limit"""
)


async def paused_calls(
    database: Database, *, user_id: str, name: str, limit: int = 200
) -> list[tuple[str, str]]:
    """The user's calls of `name` waiting for an answer: (request id, session id), oldest first."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(PAUSED, {"name": name, "limit": limit})
        return [(row.request_id, row.session_id) for row in rows]
