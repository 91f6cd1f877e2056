"""Everything the orchestrator keeps in PostgreSQL, opened once per process."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row

from orchestrator.settings import Settings
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.store.embeddings import (
    Embedder,
    EmbeddingWorker,
    LocalMiniLMEmbeddings,
    build_embedder,
)
from orchestrator.store.engine import Database
from orchestrator.store.messages import MessageStore
from orchestrator.store.pool import ServerPool
from orchestrator.store.queue_schema import upgrade_all
from orchestrator.store.rag import Retriever
from orchestrator.store.requests import RequestLog
from orchestrator.store.result_cache import sweep_expired
from orchestrator.store.sessions import SessionLeases

logger = logging.getLogger(__name__)

# How long closing lets the embedding worker embed what this process stored
# (`chat`: a short command runs none); what is not done by then is embedded
# after it (see `embed_later`).
FLUSH_SECONDS = 3.0
# How long closing waits for each connection pool. Closing runs on the way out,
# often after an error: a database that is gone or a network that no longer
# answers must not hold up the exit (one psycopg connection attempt alone may
# last over two minutes).
CLOSE_SECONDS = 2.0

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
    _pool: ServerPool

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
            await upgrade_all(database)
            await sweep_expired(database)
            await pool.open()
            checkpointer = PooledPostgresSaver(pool)
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
            requests=RequestLog(database, checkpoints=checkpointer),
            retriever=retriever,
            embedder=embedder,
            worker=worker,
            leases=SessionLeases(database),
            _pool=pool,
        )

    async def recover(self) -> bool:
        """After a failure: start the embedded server again if it died; whether it did."""
        return await self.database.recover()

    async def close(self, *, flush_timeout: float = FLUSH_SECONDS) -> int:
        """Give the worker up to `flush_timeout` seconds to embed what is waiting, then close.

        Returns how many stored messages still wait for a vector when the
        worker did not catch up, or was not started (`embed_in_background`
        False); 0 when it caught up, or with no embedder: the caller has them
        embedded later (see `embed_later`). Bounded even when the database is
        gone: what does not close in time is left to the process's exit.
        """
        waiting = 0
        if self.worker is not None:
            caught_up = await self.worker.flush(timeout=flush_timeout)
            # a batch cut short may wait on the database to cancel its query
            await _within(self.worker.stop(), what="the embedding worker")
            if not caught_up:
                waiting = await _counted(self.worker)
        if self.embedder is not None and isinstance(self.embedder.embeddings, LocalMiniLMEmbeddings):
            # its process ends with this one anyway; here it ends in order
            await _within(asyncio.to_thread(self.embedder.embeddings.close), what="the local model")
        await _within(self.leases.close(), what="the session leases")
        await _close_connections(self._pool, self.database)
        return waiting


async def _counted(worker: EmbeddingWorker) -> int:
    """How many messages wait for a vector; 0 when the database does not say in time."""
    try:
        async with asyncio.timeout(CLOSE_SECONDS):
            return await worker.waiting()
    except (TimeoutError, Exception) as error:
        logger.debug("counting the messages to embed failed: %s", error)
        return 0


def _checkpoint_pool(database: Database) -> ServerPool:
    """The psycopg pool LangGraph's checkpointer uses (not opened yet), as the owner login."""
    # what AsyncPostgresSaver requires of its connections
    return ServerPool.autocommit(database.libpq_url, prepare_threshold=0, row_factory=dict_row)


async def _close_connections(pool: ServerPool, database: Database) -> None:
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
