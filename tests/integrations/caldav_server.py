"""A Radicale CalDAV server on 127.0.0.1, run in this process on a thread (its WSGI app)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from socketserver import ThreadingMixIn
from types import TracebackType
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import radicale
from radicale import config

USER, PASSWORD = "ada", "s3cret"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class RadicaleServer:
    """Radicale with one user (`ada`, password `s3cret`) who owns their calendars, kept in `root`."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        users = root / "users"
        users.write_text(f"{USER}:{PASSWORD}\n")
        configuration = config.load()
        configuration.update(
            {
                "storage": {"filesystem_folder": str(root / "collections")},
                "auth": {
                    "type": "htpasswd",
                    "htpasswd_filename": str(users),
                    "htpasswd_encryption": "plain",
                    "delay": "0",
                },
                "rights": {"type": "owner_only"},
            },
            "test",
            privileged=True,
        )
        # Radicale logs each refused login as a warning: expected in the tests that send one.
        logging.getLogger("radicale").setLevel(logging.ERROR)
        self._server = make_server(
            "127.0.0.1",
            0,
            radicale.Application(configuration),
            server_class=_Server,
            handler_class=_Quiet,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/"

    def __enter__(self) -> RadicaleServer:
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
