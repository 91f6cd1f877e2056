"""The user's documents in the `document_chunks` table: every query under their row-level security."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Executable, text

from orchestrator.tools.context import TextEmbedder, UserTransactions

BATCH = 64
REPLACE = text("DELETE FROM document_chunks WHERE user_id = :user_id AND document = :document")
INSERT = text(
    """INSERT INTO document_chunks
    (user_id, document, source, page, chunk, content, embedding, embedding_model)
    VALUES (:user_id, :document, :source, :page, :chunk, :content,
            CAST(:embedding AS vector), :embedding_model)"""
)
BY_MEANING = text(
    """SELECT document, page, content, 1 - (embedding <=> CAST(:vector AS vector)) AS score
    FROM document_chunks
    WHERE user_id = :user_id AND embedding_model = :model AND embedding IS NOT NULL
    ORDER BY embedding <=> CAST(:vector AS vector), document, page, chunk LIMIT :limit"""
)
BY_WORDS = text(
    """SELECT document, page, content, ts_rank(search, query) AS score
    FROM document_chunks, websearch_to_tsquery('english', :question) AS query
    WHERE user_id = :user_id AND search @@ query
    ORDER BY score DESC, document, page, chunk LIMIT :limit"""
)
ANY_WORD = text(
    """SELECT document, page, content, ts_rank(search, query) AS score
    FROM document_chunks, to_tsquery('english', :words) AS query
    WHERE user_id = :user_id AND search @@ query
    ORDER BY score DESC, document, page, chunk LIMIT :limit"""
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
    """`report.pdf, page 2` (or the file alone, for a document without pages)."""
    return f"{passage.document}, page {passage.page}" if passage.page else passage.document


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
        """The passages nearest `question` in meaning, else those sharing its words."""
        found: list[Passage] = []
        if self.embedder is not None:
            vector = _literal(await self.embedder.embed_query(question))
            found = await self._query(BY_MEANING, vector=vector, model=self.embedder.vectors_name,
                                      limit=limit)
        if not found:
            found = await self._query(BY_WORDS, question=question, limit=limit)
        if not found:  # any of its words, when not all of them are in one passage
            words = " | ".join(w for w in "".join(c if c.isalnum() else " " for c in question).split())
            found = await self._query(ANY_WORD, words=words, limit=limit) if words else []
        return found

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

    async def _query(self, query: Executable, **values: object) -> list[Passage]:
        async with self.database.user_transaction(self.user_id) as connection:
            rows = (await connection.execute(query, {"user_id": self.user_id, **values})).all()
        return [Passage(row.document, row.page, row.content, float(row.score)) for row in rows]

    async def _vectors(self, texts: list[str]) -> list[list[float] | None]:
        if self.embedder is None:
            return [None] * len(texts)
        vectors: list[list[float] | None] = []
        for start in range(0, len(texts), BATCH):
            vectors.extend(await self.embedder.embed_documents(texts[start : start + BATCH]))
        return vectors


def _literal(vector: list[float]) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
