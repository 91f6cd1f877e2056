"""What the commands stored, embedded by the keeper of the warm server (see `warm_server`).

With the server kept warm, a command that stored messages leaves their vectors to
the keeper instead of starting a `db embed` of its own: at its first look after
commands left, the keeper embeds what waits, with a model it loads once and
keeps for the next time. One embedding process at a time, as `db embed`: it
takes the same lock, and leaves the messages to a `db embed` that holds it.

Its database stays open between looks too, on an event loop of its own: the
server joined, the schema checked and the connections made once, at the first
look, not after every command. The keeper is no command using the server: it
leaves the server's list of users at once, so its connections never keep the
server from its idle stop (a fast shutdown, which ends them).
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
    """Embeds the waiting messages each time it is called; its model loaded and its database
    opened at the first call, then kept until `close`."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder: Embedder | None = None
        self._database: Database | None = None
        self._loop = asyncio.Runner()  # every look's: the database's connections live on it

    def __call__(self) -> None:
        """Embed every waiting message; nothing if embedding is off or a `db embed` is at it."""
        with embedding_lock(self._settings.data_dir) as mine:
            if not mine:
                return  # a `db embed` is at it
            if self._embedder is None:
                self._embedder = build_embedder(self._settings)
            if self._embedder is None:
                return  # semantic search is off
            count = self._loop.run(self._embed(self._embedder))
        if count:
            logger.info("embedded %d waiting messages with %s", count, self._embedder.vectors_name)

    def close(self) -> None:
        """Close the database and the event loop (the server may be gone: nothing raises)."""
        try:
            if self._database is not None:
                self._loop.run(self._database.close())
        except Exception as error:  # the keeper is ending: its log says so, and it ends regardless
            logger.warning("closing the database: %s: %s", type(error).__name__, error)
        finally:
            self._database = None
            self._loop.close()

    async def _embed(self, embedder: Embedder) -> int:
        try:
            return await EmbeddingWorker(await self._opened(), embedder).run_once()
        finally:
            # Joined to be let in (or to start it again, had it died): the keeper uses it as no
            # command does, and the idle time goes on.
            leave_embedded_server(self._settings.data_dir)

    async def _opened(self) -> Database:
        if self._database is None:
            database = await asyncio.to_thread(Database.from_settings, self._settings)
            try:
                await upgrade(database)
            except BaseException:
                await database.close()
                raise
            self._database = database
        return self._database
