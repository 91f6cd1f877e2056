"""Everything the orchestrator keeps in PostgreSQL, opened once per process."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from orchestrator.settings import Settings
from orchestrator.store.embeddings import Embedder, EmbeddingWorker, build_embedder
from orchestrator.store.engine import Database
from orchestrator.store.messages import MessageStore
from orchestrator.store.migrations import upgrade
from orchestrator.store.rag import Retriever
from orchestrator.store.requests import RequestLog

logger = logging.getLogger(__name__)


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
    _pool: AsyncConnectionPool

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,
    ) -> Storage:
        """Connect (starting the embedded server if needed), migrate, and set up checkpoints.

        `embedder` replaces the one the settings name.
        """
        # Starting the embedded server blocks for a moment; keep the loop free meanwhile.
        database = await asyncio.to_thread(Database.from_settings, settings)
        await upgrade(database)
        pool = AsyncConnectionPool(
            database.libpq_url,
            min_size=1,
            max_size=5,
            open=False,
            # what AsyncPostgresSaver requires of its connections
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        await pool.open()
        checkpointer = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await checkpointer.setup()
        embedder = embedder or build_embedder(settings)
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
            _pool=pool,
        )

    async def close(self) -> None:
        if self.worker is not None:
            await self.worker.stop()
        await self._pool.close()
        await self.database.close()
