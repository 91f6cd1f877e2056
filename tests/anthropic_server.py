"""A stand-in for Anthropic's Messages API on 127.0.0.1: scripted replies, whole or streamed.

`POST /v1/messages` answers each request with the next scripted reply: text, tool
calls (`tool_use` blocks), or an error (Anthropic's `{"type": "error", "error":
{...}}` body with its status). With `"stream": true` the reply comes as the API's
server-sent events: message_start, content_block_start / content_block_delta
(text_delta, input_json_delta) / content_block_stop per block, message_delta
(the stop reason and the usage), message_stop.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.server_thread import ServedOnThread, send_json

JsonObject = dict[str, object]
INPUT_TOKENS = 25
PIECE = 4  # characters of text or of a call's JSON a streamed delta carries


@dataclass(frozen=True)
class Failure:
    """An error the API answers with: `status` and its `kind` (`overloaded_error`, ...)."""

    status: int
    kind: str
    message: str


@dataclass(frozen=True)
class FailsMidStream:
    """A streamed reply that begins with `text`, then sends an `error` event (as under load)."""

    text: str
    failure: Failure


Reply = str | list[tuple[str, dict[str, object]]] | Failure | FailsMidStream


class AnthropicServer(ServedOnThread):
    """Serves scripted Messages API replies until closed; `requests` holds each body and key."""

    def __init__(self, replies: Sequence[Reply] = ()) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.requests: list[JsonObject] = []
        self.keys: list[str | None] = []
        self._lock = threading.Lock()
        self._http = _Server(self)
        self._serve(self._http)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def next_reply(self, request: JsonObject, key: str | None) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.keys.append(key)
            if not self.replies:
                return Failure(400, "invalid_request_error", "no scripted reply left")
            return self.replies.popleft()


class _Server(ThreadingHTTPServer):
    """The HTTP server, knowing the stand-in whose replies it sends."""

    def __init__(self, owner: AnthropicServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> AnthropicServer:
        assert isinstance(self.server, _Server)
        return self.server.owner

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path != "/v1/messages":
            return _send_error(self, Failure(404, "not_found_error", f"no route {self.path}"))
        key = self.headers.get("x-api-key") or _bearer(self.headers.get("Authorization"))
        reply = self.owner.next_reply(body, key)
        if isinstance(reply, Failure):
            return _send_error(self, reply)
        text = reply.text if isinstance(reply, FailsMidStream) else reply
        message = _message(text, model=str(body.get("model")))
        if not body.get("stream"):
            return send_json(self, 200, message)
        events = b"".join(_sse(kind, data) for kind, data in _events(message))
        if isinstance(reply, FailsMidStream):  # cut before message_delta, then the error
            events = events[: events.index(b"event: message_delta")] + _sse("error", _error(reply.failure))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(events)))
        self.end_headers()
        self.wfile.write(events)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _bearer(header: str | None) -> str | None:
    # Anthropic's client sends its key as `x-api-key`, or (newer releases) as a bearer token.
    return header.removeprefix("Bearer ") if header and header.startswith("Bearer ") else None


def _send_error(handler: BaseHTTPRequestHandler, failure: Failure) -> None:
    send_json(handler, failure.status, _error(failure))


def _error(failure: Failure) -> JsonObject:
    return {"type": "error", "error": {"type": failure.kind, "message": failure.message}}


def _message(reply: str | list[tuple[str, dict[str, object]]], *, model: str) -> JsonObject:
    if isinstance(reply, str):
        content: list[JsonObject] = [{"type": "text", "text": reply}]
    else:
        content = [
            {"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": args}
            for n, (name, args) in enumerate(reply, start=1)
        ]
    output = sum(len(json.dumps(block)) for block in content) // PIECE
    return {
        "id": "msg_stand_in",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "end_turn" if isinstance(reply, str) else "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": output},
    }


def _events(message: JsonObject) -> Iterator[tuple[str, JsonObject]]:
    usage = message["usage"]
    assert isinstance(usage, dict)
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    blocks = message["content"]
    assert isinstance(blocks, list)
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opened, field, delta, whole = {"type": "text", "text": ""}, "text", "text_delta", block["text"]
        else:
            opened = {**block, "input": {}}
            field, delta, whole = "partial_json", "input_json_delta", json.dumps(block["input"])
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}
        for at in range(0, len(whole), PIECE):
            piece = {"type": delta, field: whole[at : at + PIECE]}
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": piece}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    ending = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    # The usage so far, cumulative (the API's message_delta has the input tokens too).
    yield "message_delta", {"type": "message_delta", "delta": ending, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


def _sse(kind: str, data: JsonObject) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
