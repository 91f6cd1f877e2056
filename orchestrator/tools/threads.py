"""Blocking tool code runs on a thread of its own, so the event loop stays free.

Not on the loop's default executor: `asyncio.run` waits for that executor's
threads on the way out, so a sync tool that never returns would hold the exit
for ever. A daemon thread is abandoned when its call times out and ends with
the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

T = TypeVar("T")


async def in_thread(function: Callable[[], T], *, name: str) -> T:
    """Run `function` on a new daemon thread (in this context); what it returns or raises.

    Cancelling the await abandons the thread: Python cannot stop it, but nothing
    waits for it any more.
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            value = context.run(function)
        except BaseException as error:  # SystemExit, KeyboardInterrupt too: the caller's to judge
            _settle_soon(loop, outcome, partial(outcome.set_exception, error))
        else:
            _settle_soon(loop, outcome, partial(outcome.set_result, value))

    threading.Thread(target=run, name=f"tool {name}", daemon=True).start()
    return await outcome


def _settle_soon(
    loop: asyncio.AbstractEventLoop, outcome: asyncio.Future[T], settle: Callable[[], None]
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
        loop.call_soon_threadsafe(_settle, outcome, settle)


def _settle(outcome: asyncio.Future[T], settle: Callable[[], None]) -> None:
    if not outcome.done():  # else the caller gave up (a timeout, a cancelled turn)
        settle()
