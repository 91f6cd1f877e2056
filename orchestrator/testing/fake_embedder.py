"""A deterministic embedder for tests: texts that share words get similar vectors."""

from __future__ import annotations

import math
import re
import zlib

from langchain_core.embeddings import Embeddings


class KeywordEmbeddings(Embeddings):
    """Bag-of-words vectors (each word hashed to one of `dimensions` slots), normalised."""

    def __init__(self, *, dimensions: int = 384) -> None:
        self.dimensions = dimensions

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[zlib.crc32(word.encode()) % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0:  # no words: a fixed direction, never a zero vector (cosine needs a length)
            return [1.0] + [0.0] * (self.dimensions - 1)
        return [x / norm for x in vector]
