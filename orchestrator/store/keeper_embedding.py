"""What the commands stored, embedded by the keeper of the warm server (see `warm_server`).

With the server kept warm, a command that stored messages leaves their vectors to
the keeper instead of starting a `db embed` of its own: at its first look after
commands left, the keeper embeds what waits, with a model it loads once and
keeps for the next time. One embedding process at a time, as `db embed`: it
takes the same lock, and leaves the messages to a `db embed` that holds it.
"""

from __future__ import annotations

import asyncio
import logging

from orchestrator.settings import Settings
from orchestrator.store.embed_later import embedding_lock
from orchestrator.store.embedded import leave_embedded_server
from orchestrator.store.embeddings import Embedder, EmbeddingWorker, build_embedder
from orchestrator.store.engine import Database
from orchestrator.store.migrations import upgrade

logger = logging.getLogger(__name__)


class WaitingEmbedder:
    """Embeds the waiting messages each time it is called; its model loaded at the first call, then kept."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder: Embedder | None = None

    def __call__(self) -> None:
        """Embed every waiting message, joining the server meanwhile; nothing if embedding is off or busy."""
        with embedding_lock(self._settings.data_dir) as mine:
            if not mine:
                return  # a `db embed` is at it
            if self._embedder is None:
                self._embedder = build_embedder(self._settings)
            if self._embedder is None:
                return  # semantic search is off
            count = asyncio.run(self._embed(self._embedder))
        if count:
            logger.info("embedded %d waiting messages with %s", count, self._embedder.vectors_name)

    async def _embed(self, embedder: Embedder) -> int:
        database = await asyncio.to_thread(Database.from_settings, self._settings)
        try:
            await upgrade(database)
            return await EmbeddingWorker(database, embedder).run_once()
        finally:
            await database.close()
            leave_embedded_server(self._settings.data_dir)  # the idle time starts from here
