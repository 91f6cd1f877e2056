"""A scripted OpenAI-compatible chat server on 127.0.0.1, so the real client is exercised.

    with OpenAICompatibleServer(["Hello!"]) as server:
        settings = load_settings(openai_base_url=server.base_url, openai_api_key="test")

Each POST to `/v1/chat/completions` is answered with the next scripted reply:
a text, a list of `(tool_name, arguments)` tool calls (both plain and streamed
as server-sent events), or an `ErrorReply`. With nothing scripted it answers
400. Request bodies are kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

JsonObject = dict[str, object]


@dataclass(frozen=True)
class ErrorReply:
    """Answer one request with an HTTP error."""

    status: HTTPStatus = HTTPStatus.SERVICE_UNAVAILABLE
    message: str = "scripted failure"


Reply = str | list[tuple[str, dict[str, object]]] | ErrorReply


class OpenAICompatibleServer:
    """Serves scripted chat completions until closed."""

    def __init__(self, replies: Sequence[Reply] = ()) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.requests: list[JsonObject] = []
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._http.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> OpenAICompatibleServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.shutdown()
        self._http.server_close()

    def next_reply(self, request: JsonObject) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            return self.replies.popleft() if self.replies else None


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if not self.path.endswith("/chat/completions"):
            return self._send_json(HTTPStatus.NOT_FOUND, _error(f"no route {self.path}"))
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        reply = self.server.owner.next_reply(request)  # type: ignore[attr-defined]
        if reply is None:
            reply = ErrorReply(HTTPStatus.BAD_REQUEST, "no scripted reply left")
        if isinstance(reply, ErrorReply):
            return self._send_json(reply.status, _error(reply.message))
        model = str(request.get("model", "test-model"))
        if request.get("stream"):
            return self._send_stream(_chunks(reply, model))
        self._send_json(HTTPStatus.OK, _completion(reply, model))

    def _send_json(self, status: HTTPStatus, body: JsonObject) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, chunks: Iterator[JsonObject]) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # keep test output clean


def _error(message: str) -> JsonObject:
    return {"error": {"message": message, "type": "invalid_request_error"}}


TextOrCalls = str | list[tuple[str, dict[str, object]]]


def _tool_calls(reply: TextOrCalls) -> list[JsonObject]:
    if isinstance(reply, str):
        return []
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for name, args in reply
    ]


def _envelope(kind: str, model: str, choice: JsonObject) -> JsonObject:
    return {
        "id": "chatcmpl-test",
        "object": kind,
        "created": 0,
        "model": model,
        "choices": [{"index": 0, **choice}],
    }


def _completion(reply: TextOrCalls, model: str) -> JsonObject:
    calls = _tool_calls(reply)
    message: JsonObject = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
    if calls:
        message["tool_calls"] = calls
    body = _envelope(
        "chat.completion",
        model,
        {"message": message, "finish_reason": "tool_calls" if calls else "stop"},
    )
    body["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    return body


def _chunks(reply: TextOrCalls, model: str) -> Iterator[JsonObject]:
    def chunk(delta: JsonObject, finish: str | None = None) -> JsonObject:
        return _envelope("chat.completion.chunk", model, {"delta": delta, "finish_reason": finish})

    yield chunk({"role": "assistant", "content": ""})
    if isinstance(reply, str):
        for position, word in enumerate(reply.split(" ")):
            yield chunk({"content": word if position == 0 else f" {word}"})
        yield chunk({}, "stop")
        return
    for index, call in enumerate(_tool_calls(reply)):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, "tool_calls")
