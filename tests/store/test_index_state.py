"""`orchestrator db status` tells the state of semantic search's indexes."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from orchestrator.store import Database, MessageStore
from orchestrator.store.embeddings import Embedder, EmbeddingWorker
from orchestrator.store.index_state import IndexState, _progress
from orchestrator.store.logins import Logins
from orchestrator.store.sessions import claim_session
from orchestrator.testing import KeywordEmbeddings

VECTORS = "messages_vectors (each user's vectors, for exact search)"
HNSW = "messages_embedding (HNSW, for users past the exact-search limit)"


async def embedded_pair(database: Database) -> None:
    user, session = f"pair-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    await claim_session(database, session, user_id=user)
    embedder = Embedder(KeywordEmbeddings(), "keywords")
    store = MessageStore(database, embedder=embedder, worker=EmbeddingWorker(database, embedder))
    said = [HumanMessage(f"words {n}", id=uuid.uuid4().hex) for n in range(2)]
    await store.save(said, session_id=session, user_id=user)
    await store.worker.run_once()


async def test_db_status_shows_each_search_index_and_what_is_wrong_with_it(
    cli, database: Database, database_logins: Logins, tmp_path: Path
):
    await embedded_pair(database)
    with psycopg.connect(database_logins.owner_url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE messages")

    ready = cli("db", "status", cwd=tmp_path)

    assert ready.returncode == 0, ready.stderr
    assert f"{VECTORS}: ready, " in ready.stdout and f"{HNSW}: ready, " in ready.stdout
    assert "% of the table's pages all-visible at the last vacuum" in ready.stdout

    with psycopg.connect(database_logins.owner_url, autocommit=True) as connection:
        connection.execute("DROP INDEX messages_embedding")
        connection.execute("DROP INDEX messages_vectors")
        with pytest.raises(psycopg.errors.UniqueViolation):  # a build that fails leaves it invalid
            connection.execute(
                "CREATE UNIQUE INDEX CONCURRENTLY messages_vectors ON messages (user_id) "
                "INCLUDE (session_id, id, embedding) WHERE embedding IS NOT NULL"
            )

    broken = cli("db", "status", cwd=tmp_path)

    assert broken.returncode == 0, broken.stderr
    assert f"{HNSW}: missing (`orchestrator db upgrade` makes it)" in broken.stdout
    assert f"{VECTORS}: not valid: a build was interrupted (REINDEX INDEX messages_vectors" in broken.stdout


def test_an_index_being_built_says_how_far_it_is():
    progress = _progress("building index: loading tuples", 450, 1000, 0, 0)
    index = IndexState("messages_embedding", "HNSW", present=False, building=progress)

    assert index.describe() == "messages_embedding (HNSW): being built (building index: loading tuples, 45%)"
    assert _progress("initializing", 0, 0, 0, 0) == "initializing"
