"""How `mcp serve --transport http` reaches its clients: streamable HTTP, served by uvicorn.

Its own module: serving over standard input and output (`transports`) loads
neither uvicorn nor Starlette.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import anyio
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from orchestrator.listening import serve_on
from orchestrator.serve.transports import GRACE_SECONDS

HTTP_PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
SSE_WRITER_ERROR = "Error in standalone SSE writer"  # what the SDK logs (see `_SessionEnded`)


async def serve_http(
    server: Server, listening: socket.socket, *, host: str, on_ready: Callable[[str], None]
) -> None:
    """Serve clients over streamable HTTP at http://HOST:PORT/mcp until the process is stopped.

    `listening` is the socket `listen` bound; `on_ready` is told the URL once it serves.
    """
    logging.getLogger("mcp.server.streamable_http").addFilter(_SessionEnded())
    manager = StreamableHTTPSessionManager(app=server, security_settings=_security(host))
    app = Starlette(
        routes=[Route(HTTP_PATH, endpoint=_Endpoint(manager))],
        lifespan=lambda _: manager.run(),
    )
    bound = listening.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    # Logging through the process's own handlers (standard error), not uvicorn's.
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    await serve_on(config, listening, on_ready=lambda: on_ready(f"http://{shown}:{bound}{HTTP_PATH}"))


class _Endpoint:
    """The session manager as an ASGI app (an instance, which Starlette routes as it is)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


class _SessionEnded(logging.Filter):
    """Drops the SDK's traceback for a client that ended its session while its event stream was
    open: the stream closing then is how a session ends, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.msg == SSE_WRITER_ERROR and isinstance(error, anyio.ClosedResourceError))


def _security(host: str) -> TransportSecuritySettings | None:
    """On a loopback address, requests must name a loopback host: no DNS rebinding from a page."""
    if host not in LOOPBACK:
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
