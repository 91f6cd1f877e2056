"""Queries embedded together on the local model, each on its own on a remote one; what a batch does when it fails."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from langchain_core.embeddings import Embeddings

from orchestrator.errors import OrchestratorError
from orchestrator.store.batching import Batched
from orchestrator.store.embeddings import Embedder, LocalMiniLMEmbeddings
from orchestrator.testing import KeywordEmbeddings

KEYWORDS = KeywordEmbeddings()


class LocalKeywords(LocalMiniLMEmbeddings):
    """The local model's kind (loaded, run on a thread of its own), with keyword vectors; its batches."""

    def __init__(self) -> None:
        super().__init__()
        self._model = object()  # loaded
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(texts)
        return KEYWORDS.embed_documents(texts)


class Remote(Embeddings):
    """A remote model: a query for `slow` waits for the gate; a text over 100 characters is refused."""

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError("asynchronous only")

    def embed_query(self, text: str) -> list[float]:
        raise NotImplementedError("asynchronous only")

    async def aembed_query(self, text: str) -> list[float]:
        if text == "slow":
            await self.gate.wait()
        if len(text) > 100:
            raise ValueError("400: input too long")
        return KEYWORDS.embed_query(text)


async def test_queries_asked_at_once_on_the_local_model_are_embedded_in_one_batch():
    local = LocalKeywords()
    embedder = Embedder(local, "local", symmetric=True)
    texts = [f"query {n}" for n in range(5)]

    vectors = await asyncio.gather(*(embedder.embed_query(text) for text in texts))

    assert vectors == KEYWORDS.embed_documents(texts)
    assert local.batches == [texts], "one pass of the model for all five"


async def test_a_remote_query_neither_waits_for_nor_fails_with_another():
    gate = asyncio.Event()
    embedder = Embedder(Remote(gate), "remote", symmetric=True)
    slow = asyncio.ensure_future(embedder.embed_query("slow"))

    quick = await embedder.embed_query("quick")  # while the slow one is still out
    with pytest.raises(ValueError, match="too long"):
        await embedder.embed_query("x" * 500)
    gate.set()

    assert quick == KEYWORDS.embed_query("quick")
    assert await slow == KEYWORDS.embed_query("slow")


async def test_a_copy_for_another_model_remembers_none_of_the_first_ones_queries():
    old = Embedder(KeywordEmbeddings(dimensions=8), "old", symmetric=True)
    new = dataclasses.replace(old, embeddings=KeywordEmbeddings(dimensions=16), model_name="new")

    await old.embed_query("hello world")
    [vector] = await new.embed_documents(["hello world"])

    assert len(vector) == 16


async def test_a_batch_served_wrongly_is_an_error_for_its_callers_not_a_cancellation():
    async def serve(items: list[str]) -> list[int]:
        return [1]  # one result for two items

    batched: Batched[str, int] = Batched(serve)

    results = await asyncio.gather(batched("a"), batched("b"), return_exceptions=True)

    assert [type(result) for result in results] == [ValueError, ValueError]


def test_a_loop_closed_mid_batch_leaves_the_next_loops_callers_served():
    serving: dict[str, asyncio.Event] = {}

    async def serve(items: list[str]) -> list[str]:
        if "old" in items:
            serving["old"].set()
            await asyncio.Event().wait()  # never: its loop closes meanwhile
        return [f"v({item})" for item in items]

    batched: Batched[str, str] = Batched(serve)

    async def start_old() -> None:
        serving["old"] = asyncio.Event()
        asyncio.ensure_future(batched("old"))
        await serving["old"].wait()
        asyncio.ensure_future(batched("queued"))  # waits for the next batch
        await asyncio.sleep(0)  # one step: it is waiting now

    loop = asyncio.new_event_loop()
    loop.run_until_complete(start_old())
    loop.close()  # with the server and both callers still pending

    async def new_caller() -> str:
        async with asyncio.timeout(60):  # only a bound on a failure
            return await batched("new")

    assert asyncio.run(new_caller()) == "v(new)"


async def test_a_stopped_batch_tells_its_callers():
    started = asyncio.Event()

    async def serve(items: list[str]) -> list[str]:
        started.set()
        await asyncio.Event().wait()  # never answers
        return items

    batched: Batched[str, str] = Batched(serve)
    caller = asyncio.ensure_future(batched("a"))
    await started.wait()

    batched._server.cancel()  # the loop's shutdown cancels it so

    with pytest.raises(OrchestratorError, match="stopped"):
        await caller
