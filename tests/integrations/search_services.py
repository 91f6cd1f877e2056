"""A server on 127.0.0.1 speaking the web search APIs of Brave, Tavily and Serper as their
docs describe them, over one small corpus, each with its key check and its error shape.

- Brave: `GET /res/v1/web/search?q&count&search_lang&safesearch`, `X-Subscription-Token`;
  `{"web": {"results": [{"title", "url", "description"}]}}`; a wrong token 422
  `{"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", ...}}`.
- Tavily: `POST /search` `{"query", "max_results"}`, `Authorization: Bearer`;
  `{"query", "results": [{"title", "url", "content", "score"}]}`; a wrong key 401
  `{"detail": {"error": ...}}`, a plan's limit 432.
- Serper: `POST /serper/search` `{"q", "num"}`, `X-API-KEY`;
  `{"organic": [{"title", "link", "snippet", "position"}]}`; a wrong key 403
  `{"message": "Unauthorized.", "statusCode": 403}`, no credits left 400.
A test may make the next answer a 429 (`next_status`).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.server_thread import ServedOnThread, send_json

KEYS = {"brave": "BSA-test", "tavily": "tvly-test", "serper": "serper-test"}
PAGES = [
    ("Zebra crossings", "https://example.com/zebra", "Where people cross the road."),
    ("Zebras", "https://example.org/animals/zebra", "Striped horses of Africa."),
    ("Zebra Technologies", "https://example.net/zt", "Printers and scanners."),
]


class SearchServices(ServedOnThread):
    """Keeps each request it got in `requests` (provider, query or body, headers)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, object], dict[str, str]]] = []
        self.next_status: int | None = None
        self.out_of_credits = False
        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), self._handler()))

    def url(self, provider: str) -> str:
        host, port = self._server.server_address[:2]
        path = {"brave": "/res/v1/web/search", "tavily": "/search", "serper": "/serper/search"}
        return f"http://{host}:{port}{path[provider]}"

    def answer(self, provider: str, asked: dict[str, object], headers: dict[str, str]) -> tuple[int, object]:
        self.requests.append((provider, asked, headers))
        if not self._key_ok(provider, headers):
            return {
                "brave": (422, {"type": "ErrorResponse", "error": {
                    "code": "SUBSCRIPTION_TOKEN_INVALID", "status": 422,
                    "detail": "The provided subscription token is invalid."}}),
                "tavily": (401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}),
                "serper": (403, {"message": "Unauthorized.", "statusCode": 403}),
            }[provider]
        if self.next_status is not None:
            status, self.next_status = self.next_status, None
            return status, {"message": "Too many requests"}
        if self.out_of_credits:
            if provider == "tavily":
                return 432, {"detail": {"error": "This request exceeds your plan's set usage limit."}}
            return 400, {"message": "Not enough credits", "statusCode": 400}
        count = int(str(asked.get("count") or asked.get("max_results") or asked.get("num") or 10))
        pages = PAGES[:count]
        if provider == "brave":
            return 200, {"type": "search", "web": {"type": "search", "results": [
                {"title": t, "url": u, "description": d} for t, u, d in pages]}}
        if provider == "tavily":
            return 200, {"query": asked.get("query"), "response_time": 0.1, "results": [
                {"title": t, "url": u, "content": d, "score": 0.9} for t, u, d in pages]}
        return 200, {"searchParameters": {"q": asked.get("q")}, "organic": [
            {"title": t, "link": u, "snippet": d, "position": i}
            for i, (t, u, d) in enumerate(pages, start=1)]}

    @staticmethod
    def _key_ok(provider: str, headers: dict[str, str]) -> bool:
        given = {
            "brave": headers.get("x-subscription-token"),
            "tavily": headers.get("authorization", "").removeprefix("Bearer "),
            "serper": headers.get("x-api-key"),
        }[provider]
        return given == KEYS[provider]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        services = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != "/res/v1/web/search":
                    return self._send(404, {"message": "not found"})
                asked = {k: v[0] for k, v in parse_qs(parts.query).items()}
                self._send(*services.answer("brave", asked, self._headers()))

            def do_POST(self) -> None:
                provider = {"/search": "tavily", "/serper/search": "serper"}.get(self.path)
                if provider is None:
                    return self._send(404, {"message": "not found"})
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(*services.answer(provider, json.loads(raw or b"{}"), self._headers()))

            def _headers(self) -> dict[str, str]:
                return {k.lower(): v for k, v in self.headers.items()}

            def _send(self, status: int, body: object) -> None:
                send_json(self, status, body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
