"""The user's documents in the `document_chunks` table: every query under their row-level security."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, text

from orchestrator.tools.context import TextEmbedder, UserTransactions

from .converters import page_word

BATCH = 64
# Passages each of the two searches offers, at least, before they are scored on both.
CANDIDATES = 20
REPLACE = text("DELETE FROM document_chunks WHERE user_id = :user_id AND document = :document")
INSERT = text(
    """INSERT INTO document_chunks
    (user_id, document, source, page, chunk, content, embedding, embedding_model)
    VALUES (:user_id, :document, :source, :page, :chunk, :content,
            CAST(:embedding AS vector), :embedding_model)"""
)
# Hybrid search in one statement over the user's rows. Words: PostgreSQL's full-text search,
# each of the question's words weighted by how rare it is among the user's passages (inverse
# document frequency, as BM25 does; ts_rank has none), so the one rare word asked for
# (`zebra250`) outweighs the common ones. Meaning: cosine similarity to the question's vector
# (none without an embedder). The best :candidates of each, then every candidate scored on both.
HYBRID = text(
    """WITH words AS (
        SELECT DISTINCT quote_literal(lexeme)::tsquery AS query
        FROM unnest(to_tsvector('english', :question))
    ), passages AS (
        SELECT count(*) AS total FROM document_chunks WHERE user_id = :user_id
    ), weighted AS (
        SELECT words.query, ln((passages.total + 1.0) / (count(c.id) + 0.5)) AS weight
        FROM words CROSS JOIN passages
        JOIN document_chunks c ON c.user_id = :user_id AND c.search @@ words.query
        GROUP BY words.query, passages.total
    ), by_words AS (
        SELECT c.id FROM document_chunks c JOIN weighted ON c.search @@ weighted.query
        WHERE c.user_id = :user_id
        GROUP BY c.id ORDER BY sum(weighted.weight) DESC, c.id LIMIT :candidates
    ), by_meaning AS (
        SELECT id FROM document_chunks
        WHERE user_id = :user_id AND embedding_model = :model AND embedding IS NOT NULL
          AND CAST(:vector AS vector) IS NOT NULL
        ORDER BY embedding <=> CAST(:vector AS vector), id LIMIT :candidates
    )
    SELECT c.id, c.document, c.page, c.chunk, c.content,
        coalesce((SELECT sum(weight) FROM weighted WHERE c.search @@ weighted.query), 0) AS words,
        CASE WHEN c.embedding_model = :model
             THEN greatest(1 - (c.embedding <=> CAST(:vector AS vector)), 0) ELSE 0 END AS meaning
    FROM document_chunks c
    WHERE c.user_id = :user_id
      AND c.id IN (SELECT id FROM by_words UNION SELECT id FROM by_meaning)"""
)
DOCUMENTS = text(
    """SELECT document, count(DISTINCT page) AS pages, count(*) AS chunks,
           max(ingested_at) AS ingested_at, max(embedding_model) AS embedding_model
    FROM document_chunks WHERE user_id = :user_id GROUP BY document ORDER BY document"""
)
FORGET = text(
    "DELETE FROM document_chunks WHERE user_id = :user_id AND document = :document RETURNING id"
)


@dataclass(frozen=True)
class Passage:
    """A chunk found for a question: its file, page and text, and how well it matched."""

    document: str
    page: int | None
    text: str
    score: float

    def as_json(self) -> dict[str, object]:
        return {"document": self.document, "page": self.page, "text": self.text,
                "score": round(self.score, 4)}


def citation(passage: Passage) -> str:
    """`report.pdf, page 2`, `deck.pptx, slide 3` (or the file alone, for a document without pages)."""
    if not passage.page:
        return passage.document
    return f"{passage.document}, {page_word(passage.document)} {passage.page}"


@dataclass(frozen=True)
class Stored:
    chunks: int
    model: str | None


class Library:
    """One user's documents: `database` opens transactions that see only their rows."""

    def __init__(
        self, database: UserTransactions, user_id: str, *, embedder: TextEmbedder | None
    ) -> None:
        self.database = database
        self.user_id = user_id
        self.embedder = embedder

    async def store(self, document: str, source: str, pieces: list[tuple[int | None, str]]) -> Stored:
        """Replace `document`'s chunks with `pieces`, embedded when there is an embedder."""
        vectors = await self._vectors([content for _, content in pieces])
        model = self.embedder.vectors_name if self.embedder is not None else None
        rows = [
            {"user_id": self.user_id, "document": document, "source": source, "page": page,
             "chunk": number, "content": content, "embedding_model": model if vector else None,
             "embedding": _literal(vector) if vector else None}
            for number, ((page, content), vector) in enumerate(zip(pieces, vectors, strict=True))
        ]
        async with self.database.user_transaction(self.user_id) as connection:
            await connection.execute(REPLACE, {"user_id": self.user_id, "document": document})
            await connection.execute(INSERT, rows)
        return Stored(len(rows), model)

    async def search(self, question: str, *, limit: int) -> list[Passage]:
        """The passages that best answer `question`: by its words and (with an embedder) by
        its meaning, each score relative to the best of its kind, averaged."""
        vector = model = None
        if self.embedder is not None:
            vector = _literal(await self.embedder.embed_query(question))
            model = self.embedder.vectors_name
        async with self.database.user_transaction(self.user_id) as connection:
            rows = (await connection.execute(HYBRID, {
                "user_id": self.user_id, "question": question, "vector": vector, "model": model,
                "candidates": max(limit, CANDIDATES),
            })).all()
        return _fused(rows, by_meaning=vector is not None)[:limit]

    async def documents(self) -> list[dict[str, object]]:
        async with self.database.user_transaction(self.user_id) as connection:
            rows = (await connection.execute(DOCUMENTS, {"user_id": self.user_id})).mappings().all()
        return [
            {**row, "ingested_at": row["ingested_at"].isoformat(), "pages": row["pages"] or None}
            for row in rows
        ]

    async def forget(self, document: str) -> int:
        async with self.database.user_transaction(self.user_id) as connection:
            done = await connection.execute(FORGET, {"user_id": self.user_id, "document": document})
            return len(done.all())

    async def _vectors(self, texts: list[str]) -> list[list[float] | None]:
        if self.embedder is None:
            return [None] * len(texts)
        vectors: list[list[float] | None] = []
        for start in range(0, len(texts), BATCH):
            vectors.extend(await self.embedder.embed_documents(texts[start : start + BATCH]))
        return vectors


def _fused(rows: Sequence[Row[Any]], *, by_meaning: bool) -> list[Passage]:
    """`rows` best first: their words' and their meaning's scores, each divided by the best
    of its kind, averaged (relative score fusion); on a tie, more of the words asked."""
    best_words = max((float(r.words) for r in rows), default=0.0) or 1.0
    best_meaning = max((float(r.meaning) for r in rows), default=0.0) or 1.0
    kinds = 2 if by_meaning else 1

    def score(row: Row[Any]) -> float:
        return (float(row.words) / best_words + float(row.meaning) / best_meaning) / kinds

    ranked = sorted(rows, key=lambda r: (-score(r), -float(r.words), r.document, r.page or 0, r.chunk))
    return [Passage(r.document, r.page, r.content, score(r)) for r in ranked if score(r) > 0]


def _literal(vector: list[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
