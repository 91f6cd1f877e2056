"""A listening socket for the servers the orchestrator runs (`mcp serve --transport http`, `serve`).

Bound before the server starts: a port in use is one line at once, and clients
that connect before the server accepts wait in the backlog, not refused.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from orchestrator.errors import UserError

if TYPE_CHECKING:
    import uvicorn  # imported when a server starts: `listen` alone does not load it

CANNOT_LISTEN = "Cannot listen on {host} port {port}: {reason}"


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on HOST:PORT (port 0: a free one); UserError when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        reason = error.strerror or str(error)
        raise UserError(CANNOT_LISTEN.format(host=host, port=port, reason=reason)) from None


async def serve_on(
    config: uvicorn.Config,
    listening: socket.socket,
    *,
    on_ready: Callable[[], None],
    before_stop: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """uvicorn's server of `config` on `listening` until the task is cancelled (the command's
    signal); then `before_stop`, and the server stopped in order. The signals stay the command's."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the command's handlers (see `terminal.signals`), not uvicorn's

    http = Server(config)
    running = asyncio.ensure_future(http.serve(sockets=[listening]))
    on_ready()  # clients that come before it accepts wait in the socket's backlog
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        if before_stop is not None:
            await before_stop()
        http.should_exit = True
        await running
        raise
