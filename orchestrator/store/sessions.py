"""Sessions: which user one belongs to (claimed once), and which process runs its turn (a lease)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from typing import LiteralString, cast

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.errors import SessionOwnedError
from orchestrator.store.batching import Batched
from orchestrator.store.engine import Database
from orchestrator.store.pool import dropped

logger = logging.getLogger(__name__)

LEASE_NAMESPACE = "orchestrator.session:"
LEASE_POLL_SECONDS = 0.2
TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
UNLOCK = "SELECT pg_advisory_unlock(%s)"
# The connection is gone (a restart): its locks went with it.
LOST = (DBAPIError, psycopg.Error, OSError)


async def claim_session(database: Database, session_id: str, *, user_id: str) -> None:
    """Record `session_id` as `user_id`'s, or fail if it is someone else's.

    One round trip; not waiting for the disk, as the session's first durable
    checkpoint, written after it, takes it along.
    """
    async with database.user_pipeline(user_id, durable=False) as connection:
        await connection.execute(CLAIM, (session_id, user_id))
        # Row-level security hides another user's row: if the id is taken but
        # invisible, it is not ours.
        mine = await connection.execute(MINE, (session_id,))
    if await mine.fetchone() is None:
        raise SessionOwnedError(f"Session {session_id} belongs to another user; start a new one.")


CLAIM = "INSERT INTO sessions (session_id, user_id) VALUES (%s, %s) ON CONFLICT (session_id) DO NOTHING"
MINE = "SELECT 1 FROM sessions WHERE session_id = %s"


class SessionLeases:
    """Which process runs a turn of which session: PostgreSQL advisory locks.

    A turn (and the look at whether one was left unfinished) holds its
    session's lease, so a second process never takes a turn that is still
    running for one a stopped process left behind, and never runs its tools
    again. The locks live on one connection per process: PostgreSQL releases
    them when that connection ends, so a killed process leaves no lease behind.
    Within the process, a lock per session keeps two `Session` objects apart
    (advisory locks are re-entrant on one connection). Locks and unlocks asked
    for while others are on their way go together, in one round trip.
    """

    def __init__(self, database: Database, *, poll_seconds: float = LEASE_POLL_SECONDS) -> None:
        self._database = database
        self._poll_seconds = poll_seconds
        self._connection: AsyncConnection | None = None
        self._driver: psycopg.AsyncConnection | None = None  # the connection's own psycopg one
        self._statements: Batched[Statement, bool] = Batched(self._run)
        self._local: dict[str, asyncio.Lock] = {}
        self._held: set[int] = set()
        self._releasing: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def hold(
        self, session_id: str, *, on_wait: Callable[[], None] | None = None
    ) -> AsyncGenerator[None, None]:
        """Hold the session's lease for the block, waiting while another process holds it.

        `on_wait` is called once if the lease is taken elsewhere, before waiting.
        """
        local = self._local.setdefault(session_id, asyncio.Lock())
        async with local:
            key = lease_key(session_id)
            waited = False
            while not await self._lock(key):
                if not waited and on_wait is not None:
                    on_wait()
                waited = True
                # Polled: a blocking pg_advisory_lock would hold the shared connection.
                await asyncio.sleep(self._poll_seconds)
            self._held.add(key)
            try:
                yield
            finally:
                self._held.discard(key)
                # Released after the turn, not before its result: the lock is
                # re-entrant, so a next turn locking first still holds it after.
                self._release_later(key)

    async def close(self) -> None:
        """Release every lease of this process."""
        await asyncio.gather(*self._releasing, return_exceptions=True)
        await self._disconnect()

    async def _lock(self, key: int) -> bool:
        locking = asyncio.ensure_future(self._statements((TRY_LOCK, key)))
        try:
            return await asyncio.shield(locking)
        except asyncio.CancelledError:
            # A lock the server gave after all is not kept: nobody would release it. Tracked
            # from now, not from when the answer comes: whoever waits for the releases (close)
            # waits for this one too.
            self._track(self._release_if_locked(locking, key))
            raise

    async def _release_if_locked(self, locking: asyncio.Future[bool], key: int) -> None:
        with suppress(Exception):  # not locked: nothing to release
            if await locking and self._connection is not None:
                await self._release(key)

    def _release_later(self, key: int) -> None:
        if self._connection is None:  # closed: the lease went with it
            return
        self._track(self._release(key))

    def _track(self, releasing: Coroutine[object, object, None]) -> None:
        release = asyncio.create_task(releasing)
        self._releasing.add(release)
        release.add_done_callback(self._releasing.discard)

    async def _release(self, key: int) -> None:
        with suppress(*LOST):  # lost: gone with its connection
            await self._statements((UNLOCK, key))

    async def _run(self, asked: list[Statement]) -> list[bool]:
        try:
            return await _send(await self._connect(), asked)
        except LOST as error:
            if not _connection_lost(error):
                raise
        # The server restarted: the locks went with the old connection.
        await self._disconnect()
        return await _send(await self._connect(), asked)

    async def _connect(self) -> psycopg.AsyncConnection:
        if self._driver is not None and dropped(self._driver):  # the server restarted
            await self._disconnect()
        if self._driver is None:
            connection = await self._database.app_engine.connect()
            connection = await connection.execution_options(isolation_level="AUTOCOMMIT")
            # psycopg itself, as the statements are tiny: SQLAlchemy would cost more than they do
            # SQLAlchemy's psycopg dialect: the driver's own async connection (typed `Any | None`)
            driver = cast(psycopg.AsyncConnection, (await connection.get_raw_connection()).driver_connection)
            held = sorted(self._held)  # the running turns take their leases back
            if not all(await _send(driver, [(TRY_LOCK, key) for key in held])):
                logger.warning("a session's lease was taken by another process during a restart")
            self._connection, self._driver = connection, driver
            return driver
        return self._driver

    async def _disconnect(self) -> None:
        connection, self._connection, self._driver = self._connection, None, None
        if connection is not None:
            with suppress(DBAPIError, OSError):
                # Invalidated, not returned to the pool, where its locks would live on.
                await connection.invalidate()
                await connection.close()


Statement = tuple[LiteralString, int]  # a lease statement and its key


async def _send(driver: psycopg.AsyncConnection, asked: list[Statement]) -> list[bool]:
    """Each statement's answer, all sent in one round trip."""
    if not asked:
        return []
    async with driver.pipeline():
        cursors = [await driver.execute(statement, (key,)) for statement, key in asked]
    return [bool(row and row[0]) for row in [await cursor.fetchone() for cursor in cursors]]


def _connection_lost(error: BaseException) -> bool:
    if isinstance(error, psycopg.OperationalError | OSError):
        return True
    return getattr(error, "connection_invalidated", False)


def lease_key(session_id: str) -> int:
    """The advisory lock key of a session: 64 bits of a hash, so sessions do not share one."""
    digest = hashlib.blake2b(f"{LEASE_NAMESPACE}{session_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
