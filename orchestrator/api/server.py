"""`orchestrator serve`'s HTTP server: uvicorn on the application, and a shutdown in order.

On SIGTERM or Ctrl-C the server stops taking runs (`/ready` says 503, a new run
is refused with 503), lets those running finish within the grace time, stops
the rest (each `interrupted`, its history mended, as a cancelled run's), and
then closes its connections. A server killed outright leaves its runs to the
next start (see `recovery`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from orchestrator.api.app import build_app
from orchestrator.api.server_state import ServerState
from orchestrator.listening import listen as bind
from orchestrator.listening import serve_on

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listen:
    """Where and how the server listens."""

    host: str = "127.0.0.1"
    port: int = 8123
    tls_cert: Path | None = None
    tls_key: Path | None = None
    grace_seconds: int = 30

    def url(self, port: int) -> str:
        """The server's address, on the port it is bound to."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls_cert else 'http'}://{shown}:{port}"


async def serve(server: ServerState, listen: Listen, *, on_ready: Callable[[str], None]) -> None:
    """Serve until the task is cancelled (the command's signal), then shut down in order."""
    listening = bind(listen.host, listen.port)  # a port in use: one line, before anything runs
    config = uvicorn.Config(
        build_app(server),
        ssl_certfile=str(listen.tls_cert) if listen.tls_cert else None,
        ssl_keyfile=str(listen.tls_key) if listen.tls_key else None,
        log_config=None,  # the process's own handlers (standard error), not uvicorn's
        access_log=False,  # ours: one structured line per request (see access_log)
        lifespan="off",
        timeout_graceful_shutdown=listen.grace_seconds,
    )
    port = listening.getsockname()[1]

    async def drain() -> None:
        if running := server.board.running:
            logger.warning("stopping: %d run(s) get up to %d s to finish", running, listen.grace_seconds)
        stopped = await server.board.drain(grace_seconds=listen.grace_seconds)
        if stopped:
            logger.warning("stopped %d run(s) still running after the grace time", len(stopped))

    await serve_on(config, listening, on_ready=lambda: on_ready(listen.url(port)), before_stop=drain)
