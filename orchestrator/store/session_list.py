"""A user's sessions, newest first: when each started, its last turn, its first words, its turns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text

from orchestrator.store.engine import Database

FIRST_WORDS_CHARS = 200  # what is read of a session's first message

# One row per session of the user (row-level security shows no other user's) that holds
# a message (a chat opened and left at once has nothing to go back to): its last turn is
# its newest message, its turns are the messages the person sent.
LIST = text(
    f"""
    SELECT s.session_id, s.created_at AS started,
        max(m.created_at) AS last_turn,
        count(m.id) FILTER (WHERE m.role = 'user') AS turns,
        (SELECT left(first.content, {FIRST_WORDS_CHARS}) FROM messages first
            WHERE first.session_id = s.session_id AND first.role = 'user'
            ORDER BY first.id LIMIT 1) AS first_words
    FROM sessions s JOIN messages m ON m.session_id = s.session_id
    GROUP BY s.session_id, s.created_at
    ORDER BY max(m.created_at) DESC, s.session_id
    LIMIT :limit
    """
)
ONE = text("SELECT 1 FROM sessions WHERE session_id = :session_id")


@dataclass(frozen=True)
class SessionSummary:
    """One session as `orchestrator sessions list` shows it."""

    session_id: str
    started: datetime
    last_turn: datetime | None
    turns: int
    first_words: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "started": self.started.isoformat(),
            "last_turn": self.last_turn.isoformat() if self.last_turn else None,
            "turns": self.turns,
            "first_words": self.first_words,
        }


async def recent_sessions(database: Database, *, user_id: str, limit: int = 20) -> list[SessionSummary]:
    """The user's sessions, the one with the latest turn first."""
    async with database.user_transaction(user_id) as connection:
        rows = (await connection.execute(LIST, {"limit": limit})).all()
    return [
        SessionSummary(
            session_id=row.session_id,
            started=row.started,
            last_turn=row.last_turn,
            turns=row.turns,
            first_words=row.first_words,
        )
        for row in rows
    ]


async def session_exists(database: Database, session_id: str, *, user_id: str) -> bool:
    """Whether `session_id` is one of the user's sessions."""
    async with database.user_transaction(user_id) as connection:
        return (await connection.execute(ONE, {"session_id": session_id})).first() is not None


# A session's calls in the order they started; a call's end is when it closed, or
# else its last change once it has an outcome (a running call has none).
CALLS = text(
    """
    SELECT request_id, parent_request_id, coalesce(call_name, tool) AS name, status, outcome,
        created_at AS started,
        coalesce(closed_at, CASE WHEN outcome IS NOT NULL THEN updated_at END) AS ended
    FROM requests WHERE session_id = :session_id
    ORDER BY created_at, request_id
    LIMIT :limit
    """
)


@dataclass(frozen=True)
class SessionCall:
    """One tool call of a session, as `/requests` shows it."""

    request_id: str
    nested: bool  # made by another call (an agent's), not by the session's model
    name: str
    status: str
    outcome: str | None
    started: datetime
    ended: datetime | None

    @property
    def seconds(self) -> float | None:
        """How long it ran (None: it has not ended)."""
        return None if self.ended is None else (self.ended - self.started).total_seconds()


async def session_calls(
    database: Database, session_id: str, *, user_id: str, limit: int = 200
) -> list[SessionCall]:
    """The session's tool calls, oldest first."""
    async with database.user_transaction(user_id) as connection:
        rows = (await connection.execute(CALLS, {"session_id": session_id, "limit": limit})).all()
    return [
        SessionCall(
            request_id=row.request_id,
            nested=row.parent_request_id is not None,
            name=row.name,
            status=row.status,
            outcome=row.outcome,
            started=row.started,
            ended=row.ended,
        )
        for row in rows
    ]
