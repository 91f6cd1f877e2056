"""A remote configuration document served on 127.0.0.1 (`remote_config:`, ORCHESTRATOR_REMOTE_CONFIG_URL)."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

from tests.server_thread import ServedOnThread


class ConfigServer(ServedOnThread):
    """Serves `document` (YAML text) at /config on 127.0.0.1:`port`; counts the requests."""

    def __init__(self, document: object, *, port: int = 0, status: int = 200) -> None:
        self.document = document if isinstance(document, str) else yaml.safe_dump(document)
        self.status = status
        self.requests = 0
        self.redirect: str | None = None
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.requests += 1
                if served.redirect is not None:
                    self.send_response(302)
                    self.send_header("Location", served.redirect)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = served.document.encode()
                self.send_response(served.status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._serve(server)
        self.port = server.server_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/config"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


