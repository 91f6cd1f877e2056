"""A test's server on 127.0.0.1, serving on a thread of its own while its `with` block lasts."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from socketserver import BaseServer
from types import TracebackType
from typing import Self


class ServedOnThread:
    """Starts `self._server` on a thread at `with`, and shuts it down, closed, at the end."""

    _server: BaseServer

    def _serve(self, server: BaseServer) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def send_json(handler: BaseHTTPRequestHandler, status: int, body: object) -> None:
    """Answer `handler`'s request with `status` and `body` as JSON (None: no body)."""
    payload = b"" if body is None else json.dumps(body).encode()
    handler.send_response(status)
    if payload:
        handler.send_header("Content-Type", "application/json; charset=utf-8")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)
