"""Everything the orchestrator keeps in PostgreSQL, opened once per process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from orchestrator.settings import Settings
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.store.embeddings import (
    Embedder,
    EmbeddingWorker,
    LocalMiniLMEmbeddings,
    build_embedder,
)
from orchestrator.store.engine import CONNECT_ARGS, Database, dropped
from orchestrator.store.messages import MessageStore
from orchestrator.store.migrations import upgrade
from orchestrator.store.rag import Retriever
from orchestrator.store.requests import RequestLog
from orchestrator.store.sessions import SessionLeases

logger = logging.getLogger(__name__)

# How long closing lets the embedding worker embed what this process stored, so
# that a short `ask` leaves nothing behind; what is not done by then waits for
# the next run.
FLUSH_SECONDS = 3.0
# How long closing waits for each connection pool. Closing runs on the way out,
# often after an error: a database that is gone or a network that no longer
# answers must not hold up the exit (one psycopg connection attempt alone may
# last over two minutes).
CLOSE_SECONDS = 2.0
# How long the checkpoint pool keeps trying to replace a lost connection in the
# background (psycopg's default is five minutes of retries).
RECONNECT_SECONDS = 30.0


# What the pool logs as warnings while the server is away: a lost connection and
# each failed reconnection attempt, in bursts of multi-line libpq text. What failed
# for the user already says so in one line.
RECONNECTING_MESSAGES = (
    "discarding broken connection",
    "discarding closed connection",
    "error connecting in",
    "reconnection attempt in pool",
)


class _QuietReconnecting(logging.Filter):
    """Lower the pool's reconnection warnings to DEBUG; its other warnings stay as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        reconnecting = str(record.msg).startswith(RECONNECTING_MESSAGES)
        if record.levelno != logging.WARNING or not reconnecting:
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        # handlers without a level of their own pass any record: ask the logger
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


logging.getLogger("psycopg.pool").addFilter(_QuietReconnecting())


class CheckpointPool(AsyncConnectionPool):
    """psycopg's pool, failing at once when the server cannot be reached.

    Left to itself the pool hands out a connection the server dropped, or,
    with none at hand, waits out its whole timeout (30 s) while it retries
    connecting in the background. Here a connection the server dropped is
    noticed without a round trip and replaced, and after a connection was
    lost, a checkout that would wait for a new one tries the server first, in
    the caller, whose error then says what is wrong.
    """

    _lost = False  # a connection was lost and the server has not answered since

    async def getconn(self, timeout: float | None = None) -> AsyncConnection:
        """A pooled connection the server has not dropped, or the error of connecting to it.

        No round trip: a connection is taken for dropped when its socket has
        something to read while it is idle (the server's goodbye, or its end).
        """
        for _ in range(self.max_size + 1):
            if self._lost and not self.get_stats().get("pool_available"):
                await self._reachable()
            connection = await super().getconn(timeout)
            if not dropped(connection):
                return connection
            self._lost = True
            await connection.close()  # so that the pool discards it
            await self.putconn(connection)
        await self._reachable()  # every pooled one was dead: if the server is gone, say so
        return await super().getconn(timeout)

    async def putconn(self, connection: AsyncConnection) -> None:
        """Return `connection`; one that broke in use means the server may be gone."""
        if connection.broken:
            self._lost = True
        await super().putconn(connection)

    async def _reachable(self) -> None:
        kwargs = {"connect_timeout": CONNECT_ARGS["connect_timeout"]}
        probe = await AsyncConnection.connect(str(self.conninfo), **kwargs)
        await probe.close()
        self._lost = False


@dataclass
class Storage:
    """The database, LangGraph's checkpoints in it, messages, requests, and the embedder."""

    database: Database
    checkpointer: AsyncPostgresSaver
    messages: MessageStore
    requests: RequestLog
    retriever: Retriever
    embedder: Embedder | None
    worker: EmbeddingWorker | None
    leases: SessionLeases
    _pool: CheckpointPool

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,
    ) -> Storage:
        """Connect (starting the embedded server if needed), migrate, and set up checkpoints.

        `embedder` replaces the one the settings name. If anything fails, what
        was opened so far is closed again before the error is raised.
        """
        embedder = embedder or build_embedder(settings)
        # Starting the embedded server blocks for a moment; keep the loop free meanwhile.
        database = await asyncio.to_thread(Database.from_settings, settings)
        pool = _checkpoint_pool(database)
        try:
            await upgrade(database)
            await pool.open()
            checkpointer = PooledPostgresSaver(pool)  # type: ignore[arg-type]
            await checkpointer.setup()
        except BaseException:  # cancellation (Ctrl-C) too: nothing may stay open behind it
            await _close_connections(pool, database)
            raise
        worker = EmbeddingWorker(database, embedder) if embedder else None
        if worker is not None and embed_in_background:
            worker.start()
        messages = MessageStore(database, embedder=embedder, worker=worker)
        retriever = Retriever(
            messages,
            match_count=settings.rag_match_count,
            threshold=settings.rag_threshold,
            max_chars=settings.rag_max_chars,
        )
        return cls(
            database=database,
            checkpointer=checkpointer,
            messages=messages,
            requests=RequestLog(database),
            retriever=retriever,
            embedder=embedder,
            worker=worker,
            leases=SessionLeases(database),
            _pool=pool,
        )

    async def recover(self) -> bool:
        """After a failure: start the embedded server again if it died; whether it did."""
        return await self.database.recover()

    async def close(self, *, flush_timeout: float = FLUSH_SECONDS) -> None:
        """Give the worker up to `flush_timeout` seconds to embed what is waiting, then close.

        Bounded even when the database is gone: what does not close in time is
        left to the process's exit.
        """
        if self.worker is not None:
            await self.worker.flush(timeout=flush_timeout)
            # a batch cut short may wait on the database to cancel its query
            await _within(self.worker.stop(), what="the embedding worker")
        if self.embedder is not None and isinstance(self.embedder.embeddings, LocalMiniLMEmbeddings):
            # its process ends with this one anyway; here it ends in order
            await _within(asyncio.to_thread(self.embedder.embeddings.close), what="the local model")
        await _within(self.leases.close(), what="the session leases")
        await _close_connections(self._pool, self.database)


def _checkpoint_pool(database: Database) -> CheckpointPool:
    """The psycopg pool LangGraph's checkpointer uses (not opened yet), as the owner login."""
    return CheckpointPool(
        database.libpq_url,
        min_size=1,
        max_size=5,
        open=False,
        reconnect_timeout=RECONNECT_SECONDS,
        # what AsyncPostgresSaver requires of its connections
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            **CONNECT_ARGS,
        },
    )


async def _close_connections(pool: CheckpointPool, database: Database) -> None:
    """Close the checkpoint pool and the database's engines, each within CLOSE_SECONDS."""
    # The pool's own timeout is for its workers; ours also covers closing its connections.
    await _within(pool.close(timeout=CLOSE_SECONDS / 2), what="the checkpoint pool")
    await _within(database.close(), what="the database connections")


async def _within(closing: Awaitable[None], *, what: str) -> None:
    """Await `closing` for at most CLOSE_SECONDS; a failure is logged, never raised.

    It runs on the way out, often after another error, which is the one to report.
    """
    try:
        async with asyncio.timeout(CLOSE_SECONDS):
            await closing
    except TimeoutError:
        logger.warning("closing %s took over %.0f s; leaving it to the exit", what, CLOSE_SECONDS)
    except Exception as error:
        logger.warning("closing %s failed: %s: %s", what, type(error).__name__, error)
