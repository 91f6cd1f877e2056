"""The ASGI application of `orchestrator serve`: its routes behind one gate.

The gate, around every request: a request id (the client's `x-request-id`, or a
new one, sent back), the caller's identity (401 and 429 before any route runs;
`/ok`, `/ready` and `/info` are open), the HTTP request's trace context made the
current one (a run's spans are its children), refusals as `{"detail": ...}` with
their status, and one access-log line when the response has ended.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.api import other_routes, run_routes, thread_routes
from orchestrator.api.access_log import AccessLine, log_access
from orchestrator.api.identity import Identity
from orchestrator.api.server_state import ServerState
from orchestrator.api.wire import json_response
from orchestrator.errors import (
    AuthenticationError,
    DatabaseUnavailableError,
    RateLimitedError,
    RequestRefusedError,
    SessionOwnedError,
    UserError,
)
from orchestrator.tracing.spans import continued, span

logger = logging.getLogger(__name__)


def build_app(server: ServerState) -> Starlette:
    """The application serving `server`'s assistants, threads, runs and store."""
    app = Starlette(
        routes=[*thread_routes.ROUTES, *run_routes.ROUTES, *other_routes.ROUTES],
        exception_handlers={UserError: _refused, HTTPException: _routing, Exception: _failed},
    )
    app.state.server = server
    app.add_middleware(Gate, server=server)
    return app


class Gate:
    """Pure ASGI (streamed responses pass through untouched): see the module's docstring."""

    def __init__(self, app: ASGIApp, *, server: ServerState) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        line = AccessLine.start(scope, request_id=headers.get("x-request-id") or uuid.uuid4().hex)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                line.status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", line.request_id.encode())]
                line.run_id = _run_id(message)
            await send(message)

        began = time.perf_counter()
        try:
            with continued(headers), span(f"{scope['method']} {scope['path']}", _span_attributes(line), kind="SERVER"):
                identity = await self._identity(scope, headers, sending)
                if identity is not None:
                    line.identity = identity
                    scope.setdefault("state", {})["identity"] = identity
                    await self.app(scope, receive, sending)
        finally:
            log_access(line, seconds=time.perf_counter() - began)

    async def _identity(self, scope: Scope, headers: Mapping[str, str], send: Send) -> Identity | None:
        if scope["path"] in other_routes.OPEN_PATHS:
            return Identity(user_id="", key_id="", via="api_key")  # no route there reads it
        try:
            return await self.server.authenticator.authenticate(headers)
        except RateLimitedError as limited:
            retry = {"Retry-After": str(max(1, round(limited.retry_after)))}
            response = json_response({"detail": str(limited)}, status=429, headers=retry)
        except AuthenticationError as refused:
            response = json_response({"detail": str(refused)}, status=401, headers={"WWW-Authenticate": "Bearer"})
        except DatabaseUnavailableError as away:  # the keys cannot be looked up: no one is let in
            response = json_response({"detail": str(away)}, status=503)
        await response(scope, _no_body, send)
        return None


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


def _run_id(message: Message) -> str | None:
    for name, value in message.get("headers", []):
        if name.lower() == b"content-location":
            return value.decode("latin-1").rsplit("/runs/", 1)[-1]
    return None


def _span_attributes(line: AccessLine) -> dict[str, str]:
    return {"http.request.method": line.method, "url.path": line.path, "orchestrator.http_request_id": line.request_id}


async def _refused(_: Request, error: Exception) -> Response:
    return json_response({"detail": str(error)}, status=_status(error))


async def _routing(request: Request, error: Exception) -> Response:
    """A path or method no route has (404, 405): refused as every refusal is, `{"detail": ...}`."""
    status = error.status_code if isinstance(error, HTTPException) else 404
    said = f"no {request.method} {request.url.path} here" if status in (404, 405) else str(error)
    return json_response({"detail": said}, status=status)


async def _failed(request: Request, error: Exception) -> Response:
    logger.exception("%s %s failed", request.method, request.url.path, exc_info=error)
    return json_response({"detail": f"internal error ({type(error).__name__})"}, status=500)


def _status(error: Exception) -> int:
    if isinstance(error, RequestRefusedError):
        return error.status
    if isinstance(error, SessionOwnedError):
        return 404  # another user's session: not told apart from none
    if isinstance(error, DatabaseUnavailableError):
        return 503
    return 400
