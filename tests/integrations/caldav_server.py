"""A Radicale CalDAV server on 127.0.0.1, run in this process on a thread (its WSGI app)."""

from __future__ import annotations

import logging
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import radicale
from radicale import config

from tests.server_thread import ServedOnThread

USER, PASSWORD = "ada", "s3cret"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class RadicaleServer(ServedOnThread):
    """Radicale with one user (`ada`, password `s3cret`) who owns their calendars, kept in `root`;
    the calendar `read_only` names (its id) they may read but not change, as a calendar shared
    with them read-only would be."""

    def __init__(self, root: Path, *, read_only: str | None = None) -> None:
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
                "rights": _rights(root, read_only),
            },
            "test",
            privileged=True,
        )
        # Radicale logs each refused login as a warning: expected in the tests that send one.
        logging.getLogger("radicale").setLevel(logging.ERROR)
        self._serve(
            make_server(
                "127.0.0.1",
                0,
                radicale.Application(configuration),
                server_class=_Server,
                handler_class=_Quiet,
            )
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/"


def _rights(root: Path, read_only: str | None) -> dict[str, str]:
    if read_only is None:
        return {"type": "owner_only"}
    rules = root / "rights"
    rules.write_text(
        "[root]\nuser: .+\ncollection:\npermissions: R\n\n"
        "[principal]\nuser: .+\ncollection: {user}\npermissions: RW\n\n"
        f"[read-only]\nuser: .+\ncollection: {{user}}/{read_only}\npermissions: r\n\n"
        "[calendars]\nuser: .+\ncollection: {user}/[^/]+\npermissions: rw\n"
    )
    return {"type": "from_file", "file": str(rules)}
