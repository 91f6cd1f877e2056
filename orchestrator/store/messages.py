"""Stored conversation messages: saving, text search and semantic search, always per user."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import LiteralString

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pgvector.sqlalchemy import Vector
from psycopg import sql
from psycopg.rows import TupleRow
from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Float,
    bindparam,
    cast,
    func,
    literal_column,
    select,
)
from sqlalchemy.sql import Select

from orchestrator.notes import is_note
from orchestrator.store.embeddings import (
    CALLS_PREFIX,
    EMBEDDABLE,
    Embedder,
    EmbeddingWorker,
    Unembedded,
    embeddable,
)
from orchestrator.store.engine import Database, driver_sql
from orchestrator.store.models import messages
from orchestrator.store.numbers import Numbers
from orchestrator.store.text import storable_json, storable_text

# Messages stored already (a resumed turn's, or archived by another process) are skipped;
# the others get ids in their order, and those to embed go back with their text, for
# the worker. One statement, one round trip.
SAVE = f"""
    WITH new AS (
        INSERT INTO messages (message_id, session_id, user_id, role, content, tool_name, request_id)
        SELECT row.message_id, %(session_id)s, %(user_id)s, row.role, row.content, row.tool_name,
            row.request_id
        FROM unnest(
            %(message_ids)s::text[], %(roles)s::text[], %(contents)s::text[], %(tool_names)s::text[],
            %(request_ids)s::text[]
        ) WITH ORDINALITY AS row (message_id, role, content, tool_name, request_id, position)
        ORDER BY row.position
        ON CONFLICT (message_id) DO NOTHING
        RETURNING id, role, content
    )
    SELECT id, CASE WHEN {EMBEDDABLE.replace("%", "%%")} THEN content END AS unembedded FROM new
"""
ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
# Up to this many messages of a user, nearest-neighbour search is exact: the
# `messages_vectors` index holds their vectors and PostgreSQL sorts them by distance
# (recall 1.0). Past it, exact search goes on while it costs less than the HNSW
# index would (see `searches_exactly`).
EXACT_SEARCH_LIMIT = 10_000
# For the index: how many candidates to keep (pgvector's largest), and how far its
# iterative scan may look for rows of this user, who may own a small share of the
# table. For users of 20,000 messages in a table of 140,000 (share 14%), 400 and 10
# candidates a row gave recall 0.98; these gave 0.98 to 1.0 (and at that share the
# switch chooses exact search).
EF_SEARCH = 1000
MAX_SCAN_TUPLES = 200_000
# How many rows the index is asked for, per row wanted, before the best are kept.
CANDIDATES = 20
# What one row the filtered HNSW scan visits costs, in rows the exact search reads.
# Measured with scripts/bench_rag.py (users of 20,000 messages in a table of 140,000:
# exact search 16–21 ms, about 1 µs a row; the index with ef_search 400 about 10 ms
# for some 400 × 7 rows visited), and higher in larger tables.
INDEX_ROW_COST = 4
MEANING_THRESHOLD = 0.3  # of cosine similarity, for a search by meaning someone asked for


@dataclass(frozen=True)
class FoundMessage:
    """A stored message that matched a search; `score` is ts_rank or cosine similarity."""

    message_id: str
    session_id: str
    role: str
    content: str
    tool_name: str | None
    created_at: datetime
    score: float


class MessageStore:
    """Messages of every session, each row readable only by its own user."""

    def __init__(
        self,
        database: Database,
        *,
        embedder: Embedder | None = None,
        worker: EmbeddingWorker | None = None,
    ) -> None:
        self.database = database
        self.embedder = embedder
        self.worker = worker
        self._large: set[tuple[str, int | None]] = set()  # (user, limit): seen owning more messages

    async def save(self, batch: Sequence[BaseMessage], *, session_id: str, user_id: str) -> int:
        """Store the messages not stored yet (by message id); how many were new."""
        rows = [_row(m) for m in batch if m.id]
        if not rows:
            return 0
        columns = {name: [row[name] for row in rows] for name in rows[0]}
        # Not durable: the archive copies the checkpoints, from which a session archives
        # again on opening what it lacks.
        async with self.database.user_pipeline(user_id, durable=False) as connection:
            cursor = await connection.execute(
                SAVE, {"session_id": session_id, "user_id": user_id, **columns}
            )
        new = await cursor.fetchall()
        if self.worker is not None:
            unembedded = [Unembedded(row_id, text) for row_id, text in new if text is not None]
            if unembedded:
                self.worker.notify(unembedded)
        return len(new)

    async def search_messages(
        self,
        query: str,
        user_id: str,
        *,
        limit: int = 10,
        session_id: str | None = None,
        exclude_session_id: str | None = None,
    ) -> list[FoundMessage]:
        """Full-text search (web-search syntax: words, "quoted phrases", or, -not), best first."""
        statement = _text_search(in_session=session_id is not None, excluding=exclude_session_id is not None)
        values: dict[str, object] = {
            "query": storable_text(query),
            "user_id": user_id,
            "session_id": session_id,
            "exclude": exclude_session_id,
            "limit": limit,
        }
        async with self.database.user_pipeline(user_id) as connection:
            cursor = await connection.execute(statement, values)
        return _found(await cursor.fetchall())

    async def search_any_words(
        self, query: str, user_id: str, *, limit: int = 10, exclude_session_id: str | None = None
    ) -> list[FoundMessage]:
        """Text search for messages with any of the query's words (text search's RAG fallback)."""
        words = re.findall(r"\w{3,}", query.lower())[:20]
        if not words:
            return []
        return await self.search_messages(
            " or ".join(words), user_id, limit=limit, exclude_session_id=exclude_session_id
        )

    async def search(self, query: str, user_id: str, *, limit: int = 5) -> list[FoundMessage]:
        """The user's messages best matching `query`: by meaning when an embedder is
        configured (similarity at least `MEANING_THRESHOLD`), else by words."""
        if self.embedder is None:
            return await self.search_messages(query, user_id, limit=limit)
        return await self.semantic_message_search(
            query, user_id, limit, match_threshold=MEANING_THRESHOLD
        )

    async def semantic_message_search(
        self,
        query_text: str,
        user_id: str,
        match_count: int = 5,
        match_threshold: float = 0.7,
        *,
        exclude_session_id: str | None = None,
    ) -> list[FoundMessage]:
        """The user's `match_count` messages nearest in meaning, with similarity ≥ `match_threshold`.

        Raises LookupError when no embedder is configured.
        """
        if self.embedder is None:
            raise LookupError("semantic search is off: no embedder is configured")
        vector = await self.embedder.embed_query(query_text)
        return await self.nearest(
            vector, user_id, match_count=match_count, exclude_session_id=exclude_session_id,
            match_threshold=match_threshold,
        )

    async def nearest(
        self,
        vector: Sequence[float],
        user_id: str,
        *,
        match_count: int,
        match_threshold: float = -1.0,
        exclude_session_id: str | None = None,
        exact_limit: int | None = None,
    ) -> list[FoundMessage]:
        """The user's `match_count` messages nearest to `vector` by cosine distance.

        Exact while that costs less than the HNSW index (`searches_exactly`),
        else through the index, scanning on until this user's rows are found.
        `exact_limit` fixes the switch instead: exact up to that many messages of
        the user, through the index past it (benchmarks compare the paths so).
        """
        values = {
            "vector": Numbers(vector),
            "user_id": user_id,
            "exclude": exclude_session_id,
            "limit": match_count,
        }
        excluding = exclude_session_id is not None
        if (user_id, exact_limit) not in self._large:
            # Most users own few messages: the count and the exact search go together,
            # in one round trip; when the index costs less, it is asked instead.
            async with self.database.user_pipeline(user_id) as connection:
                owned = await connection.execute(OWNED, values)
                exact = await connection.execute(_nearest(excluding=excluding, exact=True), values)
            row = await owned.fetchone()
            if row is None or _exactly(row[0], row[1], limit=exact_limit):
                return _ranked(_found(await exact.fetchall()), match_threshold)
            self._large.add((user_id, exact_limit))  # messages are seldom deleted: it stays so
        async with self.database.user_pipeline(user_id) as connection:
            for setting in INDEX_SETTINGS:
                await connection.execute(setting)
            cursor = await connection.execute(_nearest(excluding=excluding, exact=False), values)
        return _ranked(_found(await cursor.fetchall()), match_threshold)


def _exactly(owned: int, table_rows: float, *, limit: int | None) -> bool:
    return searches_exactly(owned, table_rows) if limit is None else owned <= limit


def searches_exactly(owned: int, table_rows: float) -> bool:
    """Whether a user owning `owned` of the table's `table_rows` rows is searched exactly.

    Always up to EXACT_SEARCH_LIMIT rows. Past it, when reading each of the user's vectors
    costs less than the HNSW scan would: to find EF_SEARCH rows of a user who owns
    a share of the table, it visits about EF_SEARCH ÷ share rows, each
    INDEX_ROW_COST times as dear. So a user of 20,000 messages is searched
    exactly in a table of a million (recall 1.0), and through the index where
    they own most of the table.
    """
    if owned <= EXACT_SEARCH_LIMIT:
        return True
    return owned * owned <= INDEX_ROW_COST * EF_SEARCH * max(table_rows, owned)


def _ranked(found: list[FoundMessage], threshold: float) -> list[FoundMessage]:
    """Best first, those below `threshold` left out."""
    # the index's relaxed order may return neighbours slightly out of order
    found.sort(key=lambda m: m.score, reverse=True)
    return [m for m in found if m.score >= threshold]


# The user's rows, and the planner's estimate of the whole table's (any role may read it).
OWNED = """
    SELECT count(*), (SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass)
    FROM messages WHERE user_id = %(user_id)s
"""


# pgvector's iterative scan, to find this user's rows among every user's in the index.
INDEX_SETTINGS = (
    sql.SQL("SET LOCAL hnsw.iterative_scan = relaxed_order"),
    sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(EF_SEARCH)),
    sql.SQL("SET LOCAL hnsw.max_scan_tuples = {}").format(sql.Literal(MAX_SCAN_TUPLES)),
)
# A search's statement, its columns those of `FoundMessage`.
Search = Select[str, str, str, str, str | None, datetime, float]


@cache
def _nearest(*, excluding: bool, exact: bool) -> LiteralString:
    """The nearest-neighbour search as SQL for psycopg, built once per shape."""
    distance = messages.c.embedding.cosine_distance(cast(bindparam("vector"), Vector()))
    exclude: BindParameter[str] | None = bindparam("exclude") if excluding else None
    statement = (_exact_nearest if exact else _indexed_nearest)(distance, exclude=exclude)
    # The vector goes in binary, as an array of numbers: as text it took 0.15 ms to format.
    return driver_sql(statement).replace("%(vector)s", "%(vector)b")


def _exact_nearest(distance: ColumnElement[float], *, exclude: BindParameter[str] | None) -> Search:
    """Every vector of the user compared, from the `messages_vectors` index alone (migration 10).

    The inner query reads only what that index holds (an index-only scan, the
    user's vectors side by side); the heap is read for the rows found.
    """
    # An expression the HNSW index cannot serve sorts exactly.
    inner = select(messages.c.id, distance.label("distance")).where(
        messages.c.user_id == bindparam("user_id"), messages.c.embedding.is_not(None)
    )
    if exclude is not None:
        inner = inner.where(messages.c.session_id != exclude)
    found = inner.order_by(distance + literal_column("0")).limit(bindparam("limit")).subquery("found")
    similarity = literal_column("1", Float(asdecimal=False)) - found.c.distance
    return (
        _select(similarity, user_id=bindparam("user_id"))
        .join_from(messages, found, messages.c.id == found.c.id)
        .order_by(found.c.distance)
    )


def _indexed_nearest(distance: ColumnElement[float], *, exclude: BindParameter[str] | None) -> Search:
    """The user's nearest through the HNSW index: CANDIDATES times the rows asked, best kept.

    The iterative scan returns rows in a relaxed order, each at its exact
    distance; taking the best of several times as many (a materialized CTE, as
    pgvector's documentation shows) keeps recall near 1.0 for large users.
    """
    limit: BindParameter[int] = bindparam("limit")
    similarity = literal_column("1", Float(asdecimal=False)) - distance
    candidates = (
        _select(similarity, user_id=bindparam("user_id"), exclude=exclude)
        .where(messages.c.embedding.is_not(None))
        .order_by(distance)
        .limit(limit * literal_column(str(CANDIDATES)))
        .cte("candidates")
        .prefix_with("MATERIALIZED")
    )
    return select(candidates).order_by(candidates.c.score.desc()).limit(limit)


@cache
def _text_search(*, in_session: bool, excluding: bool) -> LiteralString:
    """The full-text search as SQL for psycopg, built once per shape."""
    tsquery = func.websearch_to_tsquery(literal_column("'english'::regconfig"), bindparam("query"))
    score = func.ts_rank(messages.c.search, tsquery)
    statement = _select(
        score,
        user_id=bindparam("user_id"),
        session_id=bindparam("session_id") if in_session else None,
        exclude=bindparam("exclude") if excluding else None,
    )
    return driver_sql(
        statement.where(messages.c.search.op("@@")(tsquery))
        .order_by(score.desc(), messages.c.id.desc())
        .limit(bindparam("limit"))
    )


def _found(rows: Sequence[TupleRow]) -> list[FoundMessage]:
    """The rows of a search (`_select`'s columns) as messages."""
    return [FoundMessage(*row) for row in rows]


def _select(
    score: ColumnElement[float],
    *,
    user_id: str | BindParameter[str],
    session_id: str | BindParameter[str] | None = None,
    exclude: str | BindParameter[str] | None = None,
) -> Search:
    # Row-level security already limits rows to the user; the WHERE says so too,
    # and lets the planner use the (user_id, ...) index.
    statement = select(
        messages.c.message_id,
        messages.c.session_id,
        messages.c.role,
        messages.c.content,
        messages.c.tool_name,
        messages.c.created_at,
        score.label("score"),
    ).where(messages.c.user_id == user_id)
    if session_id is not None:
        statement = statement.where(messages.c.session_id == session_id)
    if exclude is not None:
        statement = statement.where(messages.c.session_id != exclude)
    return statement


def _row(message: BaseMessage) -> dict[str, str | None]:
    """The message as SAVE's columns: without NUL, which a user, model or tool may send."""
    request_id = None
    if isinstance(message, ToolMessage) and isinstance(message.artifact, dict):
        # A tool message's artifact is any value; a dict here is the envelope's, keyed by text.
        request_id = typing.cast(dict[str, object], message.artifact).get("request_id")
    tool_name = message.name if isinstance(message, ToolMessage) else None
    return {
        "message_ids": storable_text(str(message.id)),
        # A note for the model is stored as what it is: never embedded as the person's words.
        "roles": "system" if is_note(message) else ROLES.get(message.type, "system"),
        "contents": storable_text(_content(message)),
        "tool_names": storable_text(tool_name) if tool_name is not None else None,
        "request_ids": storable_text(str(request_id)) if request_id is not None else None,
    }


def _content(message: BaseMessage) -> str:
    if isinstance(message, AIMessage) and message.tool_calls and not message.text:
        calls = storable_json([{c["name"]: c["args"]} for c in message.tool_calls])
        return CALLS_PREFIX + json.dumps(calls, default=str)
    return message.text


@dataclass(frozen=True)
class EmbeddingCounts:
    """The stored messages meant to be embedded, and the vectors they have, by model."""

    total: int
    by_model: dict[str, int]

    @property
    def embedded(self) -> int:
        return sum(self.by_model.values())


async def message_counts(database: Database) -> EmbeddingCounts:
    """The stored messages meant to be embedded, and how many of them are, by which model.

    Only what the worker embeds is counted (tool output and system notes never
    get a vector), so `total` and `embedded` are equal once it has caught up.
    Every user's rows: a maintenance view.
    """
    statement = (
        select(messages.c.embedding_model, func.count(), func.count(messages.c.embedding))
        .where(embeddable())
        .group_by(messages.c.embedding_model)
    )
    async with database.admin_transaction() as connection:
        rows = (await connection.execute(statement)).all()
    by_model = {model: embedded for model, _, embedded in rows if model is not None and embedded}
    return EmbeddingCounts(sum(count for _, count, _ in rows), by_model)
