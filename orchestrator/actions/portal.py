"""An event loop of the process's own, on a thread, where the actions of `as_node` run.

A workflow may call its nodes synchronously (`graph.invoke`) or on its own event
loop (`graph.ainvoke`); the database pool and the tools of the orchestrator
belong to one loop. Both kinds of call run their action here, in the caller's
context (copied), so LangGraph's `interrupt()` inside the pipeline (a sensitive
action's question) still pauses the caller's graph.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")


class Portal:
    """A daemon thread running an event loop forever; coroutines are handed to it."""

    def __init__(self, *, name: str = "orchestrator-actions") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(
        self, work: Coroutine[object, object, T], *, context: contextvars.Context | None = None
    ) -> concurrent.futures.Future[T]:
        """Run `work` on the portal's loop in `context` (default: a copy of the caller's)."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = context if context is not None else contextvars.copy_context()

        def start() -> None:
            task = self.loop.create_task(work, context=context)
            task.add_done_callback(lambda finished: _settle(done, finished))

        self.loop.call_soon_threadsafe(start)
        return done

    def call(self, work: Coroutine[object, object, T]) -> T:
        """`work`'s result, waiting here (from a thread other than the portal's)."""
        return self.submit(work).result()

    async def wait(self, work: Coroutine[object, object, T]) -> T:
        """`work`'s result, awaited on the caller's own loop."""
        return await asyncio.wrap_future(self.submit(work))

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop the loop and wait for the thread (for at most `timeout` seconds)."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


def _settle(done: concurrent.futures.Future[T], task: asyncio.Task[T]) -> None:
    if task.cancelled():
        done.cancel()
    elif (error := task.exception()) is not None:
        done.set_exception(error)
    else:
        done.set_result(task.result())
