"""A thread with an event loop of its own, for the MCP sessions started before any loop runs.

Servers to be asked about can then be started before the command's own
event loop runs, even before it has imported LangChain: they boot on the
other core while the process imports, instead of after. Their sessions live
on this loop; calls from other loops are handed over (see `McpClient`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")
STOP_SECONDS = 10.0  # how long `stop` waits for the loop's thread to end


class McpThread:
    """A daemon thread running an event loop, started by the first `submit`."""

    def __init__(self, name: str = "mcp-sessions") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, work: Coroutine[object, object, T]) -> concurrent.futures.Future[T]:
        """Run `work` on the thread's loop; its future, to wait for from anywhere."""
        return asyncio.run_coroutine_threadsafe(work, self._running_loop())

    async def run(self, work: Coroutine[object, object, T]) -> T:
        """Run `work` on the thread's loop and wait for it here; cancelling here cancels it."""
        return await asyncio.wrap_future(self.submit(work))

    def stop(self) -> None:
        """Stop the loop and wait (a while) for its thread to end."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_SECONDS)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve, args=(loop,), name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
