"""Requests that arrive while one is served are served together, in one call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from orchestrator.errors import OrchestratorError

Item = TypeVar("Item")
Result = TypeVar("Result")
Waiting = list[tuple[Item, "asyncio.Future[Result]"]]

STOPPED = "the batch was stopped before it was served"


class Batched(Generic[Item, Result]):
    """Calls `serve` with every item waiting, one call at a time (per event loop).

    Concurrent sessions each embedding a query on the local model would
    otherwise each wait their turn for its process, one round trip each; the
    session leases' locks go to the server together the same way.
    """

    def __init__(self, serve: Callable[[list[Item]], Awaitable[Sequence[Result]]]) -> None:
        self._serve = serve
        self._waiting: Waiting[Item, Result] = []
        self._server: asyncio.Task[None] | None = None

    async def __call__(self, item: Item) -> Result:
        """`serve`'s result for `item`, served with whatever else waits meanwhile."""
        loop = asyncio.get_running_loop()
        server = self._server
        if server is None or server.done() or server.get_loop() is not loop:
            # Whatever waits from another loop (one that closed) is nobody's to serve here.
            self._waiting = []
            self._server = loop.create_task(self._serve_waiting())
        result: asyncio.Future[Result] = loop.create_future()
        self._waiting.append((item, result))
        return await result

    async def _serve_waiting(self) -> None:
        batch: Waiting[Item, Result] = []
        try:
            while self._waiting:
                # A caller that was cancelled is not waited for: its item is skipped.
                batch = [(item, result) for item, result in self._waiting if not result.done()]
                self._waiting = []
                if batch:
                    await self._serve_batch(batch)
        finally:  # stopped itself (its loop is closing): no caller is left waiting for ever
            for _, result in [*batch, *self._waiting]:
                if not result.done() and not result.get_loop().is_closed():
                    result.set_exception(OrchestratorError(STOPPED))

    async def _serve_batch(self, batch: Waiting[Item, Result]) -> None:
        try:
            results = await self._serve([item for item, _ in batch])
            served = list(zip(batch, results, strict=True))
        except Exception as error:  # every caller of the batch hears it
            for _, result in batch:
                if not result.done():
                    result.set_exception(error)
            return
        for (_, result), value in served:
            if not result.done():
                result.set_result(value)
