"""Which user a session belongs to: a session id is claimed once, by one user."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from orchestrator.errors import UserError
from orchestrator.store.engine import Database
from orchestrator.store.models import sessions


class SessionOwnedError(UserError):
    """The session id is taken by another user."""


async def claim_session(database: Database, session_id: str, *, user_id: str) -> None:
    """Record `session_id` as `user_id`'s, or fail if it is someone else's."""
    async with database.user_transaction(user_id) as connection:
        await connection.execute(
            insert(sessions)
            .values(session_id=session_id, user_id=user_id)
            .on_conflict_do_nothing(index_elements=["session_id"])
        )
        # Row-level security hides another user's row: if the id is taken but
        # invisible, it is not ours.
        mine = await connection.scalar(
            select(sessions.c.session_id).where(sessions.c.session_id == session_id)
        )
    if mine is None:
        raise SessionOwnedError(f"Session {session_id} belongs to another user; start a new one.")
