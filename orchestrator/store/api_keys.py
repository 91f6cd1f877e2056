"""The server's users and their API keys (`orchestrator users`, `orchestrator serve`).

A key is `orch_<key id>_<secret>`: 256 random bits, shown once when it is
issued. What is kept is SHA-256 of the whole key: a request's key is found by
one index lookup of its hash, so no comparison of secrets runs in Python, and
the table holds nothing a key could be made from. The key id is in the key so
that a person can tell which key a script holds, and `users revoke --key` can
name it.

The tables are the machine owner's (migration 15): every statement runs as the
owner login (`admin_transaction`; a request's lookup in `admin_pipeline`), never
as orchestrator_app. `last_used_at` is written when the one kept is a minute old
or more, so a busy key costs a write a minute, not one a request. Nothing is
cached: a key revoked by another process stops working on the next request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import LiteralString

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.errors import ServerUserError
from orchestrator.identifiers import RULE, can_name
from orchestrator.store.engine import Database
from orchestrator.store.models import api_keys, api_users

_K = api_keys.c
_U = api_users.c

KEY_PREFIX = "orch_"
KEY_ID_HEX = 12  # characters of a key id: 48 random bits, unique among one machine's keys
SECRET_BYTES = 32
KEY_SHAPE = re.compile(rf"{KEY_PREFIX}([0-9a-f]{{{KEY_ID_HEX}}})_[A-Za-z0-9_-]{{43}}")
# The key's owner, and `last_used_at` written when a minute old (checked again on the row
# itself: another request may have written it meanwhile).
STALE: LiteralString = "(last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"
OWNER_SQL: LiteralString = f"""
    WITH found AS (
        SELECT key_id, user_id, {STALE} AS stale FROM api_keys
        WHERE key_hash = %(hash)s AND revoked_at IS NULL
    ), touched AS (
        UPDATE api_keys SET last_used_at = now() FROM found
        WHERE api_keys.key_id = found.key_id AND found.stale AND {STALE}
    )
    SELECT key_id, user_id FROM found
"""

UNKNOWN_USER = "no user {user!r}: `orchestrator users add {user}` makes one"
USER_EXISTS = "user {user!r} exists already"
UNKNOWN_KEY = "user {user!r} has no key {key_id!r} (`orchestrator users list` shows their keys)"


@dataclass(frozen=True)
class IssuedKey:
    """A key just issued: its id, and the key itself, which is shown this once."""

    key_id: str
    key: str


@dataclass(frozen=True)
class KeyOwner:
    """Whose a presented key is."""

    key_id: str
    user_id: str


@dataclass(frozen=True)
class KeySummary:
    """One key as `users list` shows it: never its secret."""

    key_id: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True)
class UserSummary:
    """A user and their keys, oldest key first."""

    user_id: str
    created_at: datetime
    keys: tuple[KeySummary, ...]


def user_id_problem(user_id: str) -> str | None:
    """Why `user_id` cannot name a user (None: it can), by the rule every `--user` follows."""
    return None if can_name(user_id) else f"a user name is {RULE}"


def key_hash(key: str) -> bytes:
    """What is kept of `key`: its SHA-256."""
    return hashlib.sha256(key.encode()).digest()


def looks_like_a_key(key: str) -> bool:
    """Whether `key` has the shape of a key this module issues (not whether it is one)."""
    return KEY_SHAPE.fullmatch(key) is not None


class ApiKeys:
    """The users and keys kept in `database`, read and written as its owner."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def add_user(self, user_id: str) -> None:
        """Make the user `user_id`; a bad name or one taken is a `ServerUserError`."""
        if problem := user_id_problem(user_id):
            raise ServerUserError(problem)
        try:
            async with self.database.admin_transaction() as connection:
                await connection.execute(insert(api_users).values(user_id=user_id))
        except IntegrityError:
            raise ServerUserError(USER_EXISTS.format(user=user_id)) from None

    async def issue(self, user_id: str) -> IssuedKey:
        """A new key for `user_id` (who must exist); only its hash is kept."""
        key_id = secrets.token_hex(KEY_ID_HEX // 2)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
        async with self.database.admin_transaction() as connection:
            await _known(connection, user_id)
            await connection.execute(
                insert(api_keys).values(key_id=key_id, user_id=user_id, key_hash=key_hash(key))
            )
        return IssuedKey(key_id, key)

    async def revoke(self, user_id: str, *, key_id: str | None = None) -> list[str]:
        """Revoke `key_id`, or every key of the user's; the ids of the keys revoked now."""
        async with self.database.admin_transaction() as connection:
            await _known(connection, user_id)
            if key_id is not None:
                owned = select(_K.key_id).where(_K.key_id == key_id, _K.user_id == user_id)
                if (await connection.scalar(owned)) is None:
                    raise ServerUserError(UNKNOWN_KEY.format(user=user_id, key_id=key_id))
            revoking = update(api_keys).where(_K.user_id == user_id, _K.revoked_at.is_(None))
            if key_id is not None:
                revoking = revoking.where(_K.key_id == key_id)
            revoked = await connection.scalars(revoking.values(revoked_at=func.now()).returning(_K.key_id))
            return sorted(revoked)

    async def owner(self, key: str) -> KeyOwner | None:
        """Whose `key` is, if it is a key issued here and not revoked; None otherwise.

        One statement in one round trip (psycopg's pipeline: a fifth of a SQLAlchemy
        transaction's time), which writes `last_used_at` only when it is a minute old.
        """
        async with self.database.admin_pipeline() as connection:
            cursor = await connection.execute(OWNER_SQL, {"hash": key_hash(key)})
        row = await cursor.fetchone()
        return KeyOwner(key_id=str(row[0]), user_id=str(row[1])) if row is not None else None

    async def users(self) -> list[UserSummary]:
        """Every user with their keys, by name."""
        async with self.database.admin_transaction() as connection:
            users = (await connection.execute(select(_U.user_id, _U.created_at).order_by(_U.user_id))).all()
            keys = (
                await connection.execute(
                    select(_K.user_id, _K.key_id, _K.created_at, _K.last_used_at, _K.revoked_at).order_by(
                        _K.created_at, _K.key_id
                    )
                )
            ).all()
        by_user: dict[str, list[KeySummary]] = {}
        for key in keys:
            summary = KeySummary(key.key_id, key.created_at, key.last_used_at, key.revoked_at)
            by_user.setdefault(key.user_id, []).append(summary)
        return [UserSummary(u.user_id, u.created_at, tuple(by_user.get(u.user_id, ()))) for u in users]


async def _known(connection: AsyncConnection, user_id: str) -> None:
    """Nothing if `user_id` is a user; else a `ServerUserError` saying how to make one."""
    if (await connection.scalar(select(_U.user_id).where(_U.user_id == user_id))) is None:
        raise ServerUserError(UNKNOWN_USER.format(user=user_id))
