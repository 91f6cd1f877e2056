"""The database as one user sees it."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.engine import Database


@dataclass(frozen=True)
class UserDatabase:
    """Every transaction under one user's row-level security: other users' rows are not there."""

    database: Database
    user_id: str

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A transaction that sees only this user's rows."""
        return self.database.user_transaction(self.user_id)
