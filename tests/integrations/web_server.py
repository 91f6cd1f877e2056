"""A local HTTP server that speaks SearXNG's JSON API (`/search?format=json`) and serves pages."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ARTICLE = """<!doctype html>
<html><head><title>LangGraph checkpoints explained</title>
<style>body { color: red }</style><script>alert("never in the Markdown")</script></head>
<body>
<h1>Checkpoints</h1>
<p>A <strong>checkpointer</strong> saves the graph's state after every step.</p>
<ul><li>PostgreSQL</li><li>SQLite</li></ul>
<p>See <a href="/pages/other.html">the other page</a>.</p>
</body></html>
"""


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


class SearxngSite:
    """SearXNG's `/search` over `results` (what `search_reply` replaces), and `pages` by path.

    Every request is recorded in `requests` (path and query), so a test sees what was asked.
    """

    def __init__(self) -> None:
        self.pages: dict[str, Reply] = {"/pages/checkpoints.html": Reply(200, ARTICLE.encode())}
        self.results: list[dict[str, object]] = []
        self.search_reply: Reply | None = None
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.url = ""

    def page(self, path: str) -> str:
        return f"{self.url}{path}"

    def answer(self, target: str) -> Reply:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        self.requests.append((parts.path, query))
        if parts.path == "/search":
            return self.search_reply or self._search(query)
        return self.pages.get(parts.path, Reply(404, b"<h1>Not found</h1>"))

    def _search(self, query: dict[str, list[str]]) -> Reply:
        if query.get("format") != ["json"]:
            return Reply(200, b"<html>results as HTML</html>")
        body = {
            "query": query.get("q", [""])[0],
            "number_of_results": len(self.results),
            "results": self.results,
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }
        return Reply(200, json.dumps(body).encode(), "application/json")


def _handler(site: SearxngSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            reply = site.answer(self.path)
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving(site: SearxngSite) -> Iterator[SearxngSite]:
    """`site` served on 127.0.0.1 (a free port) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
