"""A server on 127.0.0.1 speaking Resend's email API as its docs describe it.

POST /emails with `Authorization: Bearer KEY`: 200 `{"id"}`, or an error object
`{"statusCode", "name", "message"}` (https://resend.com/docs/api-reference/errors):
no key `missing_api_key` (401), a wrong one `invalid_api_key` (403), a sender whose
domain is not verified `validation_error` (403), a missing field `missing_required_field`
(422), a badly formed sender `invalid_from_address` (422). A test may make it answer
`rate_limit_exceeded` (429) or `application_error` (500) next.
"""

from __future__ import annotations

import json
import re
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.server_thread import ServedOnThread, send_json

KEY = "re_test_123456789"
VERIFIED_DOMAIN = "example.org"
ADDRESS = re.compile(r"^(?:[^<>]*<)?[^@<>\s]+@([^@<>\s]+)>?$")


class ResendServer(ServedOnThread):
    """Keeps each email it accepted in `emails` (the JSON body as sent)."""

    def __init__(self) -> None:
        self.emails: list[dict[str, object]] = []
        self.next_failure: tuple[int, str] | None = None
        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), self._handler()))

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, path: str, authorization: str | None, body: object) -> tuple[int, dict[str, object]]:
        if path != "/emails":
            return 404, _error(404, "not_found", "The requested endpoint does not exist.")
        if not authorization:
            return 401, _error(401, "missing_api_key", "Missing API key in the authorization header.")
        if authorization != f"Bearer {KEY}":
            return 403, _error(403, "invalid_api_key", "API key is invalid")
        if self.next_failure is not None:
            (status, name), self.next_failure = self.next_failure, None
            return status, _error(status, name, "Too many requests." if status == 429 else "Internal error.")
        if not isinstance(body, dict):
            return 422, _error(422, "validation_error", "Invalid JSON body.")
        for field in ("from", "to", "subject"):
            if not body.get(field):
                return 422, _error(422, "missing_required_field", f"Missing `{field}` field.")
        sender = ADDRESS.match(str(body["from"]))
        if sender is None:
            return 422, _error(422, "invalid_from_address", "Invalid `from` field.")
        if sender.group(1) != VERIFIED_DOMAIN:
            domain = sender.group(1)
            return 403, _error(403, "validation_error", f"The {domain} domain is not verified.")
        self.emails.append(body)
        return 200, {"id": str(uuid.uuid4())}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                status, answer = server.answer(
                    self.path,
                    self.headers.get("Authorization"),
                    body,
                )
                send_json(self, status, answer)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _error(status: int, name: str, message: str) -> dict[str, object]:
    return {"statusCode": status, "name": name, "message": message}
