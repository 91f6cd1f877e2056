"""A scripted OpenAI-compatible chat server on 127.0.0.1, so the real client is exercised.

    with OpenAICompatibleServer(["Hello!"]) as server:
        settings = load_settings(openai_base_url=server.base_url, openai_api_key="test")

Each POST to `/v1/chat/completions` is answered with the next scripted reply:
a text, a list of `(tool_name, arguments)` tool calls (both plain and streamed
as server-sent events), an `ErrorReply`, a `HangUp`, or a `RawReply` for what
a well-behaved server would not send: a stream cut before its finish reason, no
choices, tool calls with any name, id or raw argument text. With nothing
scripted it answers 400. Request bodies are kept in `requests`.

Failures a real server shows, each after the `RawReply`'s text (and calls):

- `RawReply(error=ErrorReply(...))`: an error reported mid-stream, as
  llama.cpp's server sends one after a 200 (`data: {"error": {...}}`, then the
  stream ends); unstreamed, the HTTP error itself.
- `RawReply(drop=True)`: the connection dropped mid-reply: a chunked stream
  (or a body shorter than its `Content-Length`) that never ends.
- `RawReply(malformed="...")`: text that is not JSON where JSON belongs: a
  `data:` line of the stream, or the whole unstreamed body (sent as is, so it
  may also be JSON of the wrong shape).
- `HangUp()`: the connection closed after the request, before any answer.
- `EmptyReply()`: a 200 with an empty body (streamed: not one event).
- `Endless()`: a reply that never ends, as a model caught in a loop does.

`strict=True` answers 400, as OpenAI does, to a request whose history a strict
server refuses: a tool call without an answer right after it, an answer to no
call, an empty or missing call id, a name OpenAI would not take, or
arguments that are not a JSON object. The scripted reply is then kept.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import overload

JsonObject = dict[str, object]
FUNCTION_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class ErrorReply:
    """Answer one request with an HTTP error."""

    status: HTTPStatus = HTTPStatus.SERVICE_UNAVAILABLE
    message: str = "scripted failure"


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class RawToolCall:
    """A tool call exactly as the server sends it.

    `arguments` is sent as written (cut, `null`, a list...; None sends JSON
    null). `id` None leaves the key out; the default is a fresh id.
    """

    name: str
    arguments: str | None = "{}"
    id: str | None = field(default_factory=_call_id)

    @classmethod
    def of(cls, name: str, args: object) -> RawToolCall:
        """A call whose arguments are `args` as JSON."""
        return cls(name=name, arguments=json.dumps(args))


@dataclass(frozen=True)
class Usage:
    """The token usage the server reports for a reply (streamed: only when asked for)."""

    prompt_tokens: int = 1
    completion_tokens: int = 1
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    def to_json(self) -> JsonObject:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }


@dataclass(frozen=True)
class HangUp:
    """Close the connection after reading the request, without answering."""


@dataclass(frozen=True)
class RawReply:
    """A reply with every detail scripted.

    `cut` ends the stream after the content, without a finish reason or
    `[DONE]` (unstreamed: `finish_reason` null); `finish_reason` replaces the
    natural one. `no_choices` answers with an empty `choices` list. Streamed
    text and arguments go out in pieces of `piece_chars` characters (0: text by
    words, arguments whole). `usage` is reported (in a stream, when the client
    asks with `stream_options.include_usage`; None: never, as some servers do),
    as from model `model` (default: the one asked for).

    After the content, instead of the reply's end: `error` is reported in the
    stream (unstreamed: answered as this HTTP error); `drop` drops the
    connection; `malformed` is sent as a `data:` line (unstreamed: as the whole
    body, status 200).
    """

    text: str | None = None
    tool_calls: Sequence[RawToolCall] = ()
    finish_reason: str | None = None
    cut: bool = False
    no_choices: bool = False
    piece_chars: int = 0
    usage: Usage | None = field(default_factory=Usage)
    model: str | None = None
    error: ErrorReply | None = None
    drop: bool = False
    malformed: str | None = None

    @property
    def finish(self) -> str | None:
        """The finish reason the server reports (None: it reports none)."""
        if self.cut:
            return None
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    @property
    def ends(self) -> bool:
        """Whether the stream ends as a well-behaved one does (a finish reason, `[DONE]`)."""
        return not (self.cut or self.drop or self.error or self.malformed is not None)


@dataclass(frozen=True)
class EmptyReply:
    """A 200 with nothing in it: an empty body, or a stream without a single event."""


@dataclass(frozen=True)
class Endless:
    """A reply that never ends: streamed, `text` again and again without a finish reason,
    a piece every `every` seconds (`text` empty: a 200 and then silence); unstreamed, no
    answer at all. It stops when the client hangs up or the server closes.

    Whatever the request asks (`max_tokens`), it goes on, as a server that ignores it does.
    """

    text: str = "12*7-12 "
    every: float = 0.002


Reply = (
    str | list[tuple[str, dict[str, object]]] | ErrorReply | RawReply | HangUp | EmptyReply | Endless
)


class OpenAICompatibleServer:
    """Serves scripted chat completions until closed, on `port` (0: any free one)."""

    def __init__(
        self, replies: Sequence[Reply] = (), *, strict: bool = False, port: int = 0
    ) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.strict = strict
        self.requests: list[JsonObject] = []
        self._lock = threading.Lock()
        self.closed = threading.Event()  # ends the replies that would not end
        self._http = _Server(("127.0.0.1", port), owner=self)
        # shutdown() waits for the serving loop's next poll: a short one ends a test sooner.
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

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
        self.closed.set()
        self._http.shutdown()
        self._http.server_close()

    def next_reply(self, request: JsonObject) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            if self.strict and (problem := history_problem(request)):
                return ErrorReply(HTTPStatus.BAD_REQUEST, problem)
            return self.replies.popleft() if self.replies else None


def history_problem(request: JsonObject) -> str | None:
    """What OpenAI would refuse in the request's messages (None: nothing)."""
    awaited: list[str] = []  # ids of the last assistant message's calls not answered yet
    messages = request.get("messages")
    for position, message in enumerate(messages if isinstance(messages, list) else []):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in awaited:
                return (
                    "Messages with role 'tool' must be a response to a preceding message "
                    "with 'tool_calls'."
                )
            awaited.remove(message["tool_call_id"])
            continue
        if awaited:
            break
        for index, call in enumerate(message.get("tool_calls") or []):
            if problem := _call_problem(call, where=f"messages[{position}].tool_calls[{index}]"):
                return problem
            if call["id"] in awaited:
                return f"Duplicate tool call id {call['id']!r} in messages[{position}]."
            awaited.append(call["id"])
    if awaited:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(awaited)}"
        )
    return None


def _call_problem(call: JsonObject, *, where: str) -> str | None:
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    if not isinstance(call.get("id"), str) or not call["id"]:
        return f"Invalid '{where}.id': expected a non-empty string, got {call.get('id')!r}."
    if not isinstance(function.get("name"), str) or not FUNCTION_NAME.fullmatch(function["name"]):
        pattern = "^[a-zA-Z0-9_-]{1,64}$"
        return f"Invalid '{where}.function.name': string does not match pattern '{pattern}'."
    text = function.get("arguments")
    try:
        arguments = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return f"Invalid '{where}.function.arguments': expected a JSON object."
    return None


class _Server(ThreadingHTTPServer):
    """The HTTP server, knowing the scripted server whose replies it sends."""

    def __init__(self, address: tuple[str, int], *, owner: OpenAICompatibleServer) -> None:
        super().__init__(address, _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    @property
    def owner(self) -> OpenAICompatibleServer:
        server = self.server
        if not isinstance(server, _Server):
            raise TypeError(f"{type(self).__name__} serves only an OpenAICompatibleServer")
        return server.owner

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        if not self.path.endswith("/chat/completions"):
            return self._send_json(HTTPStatus.NOT_FOUND, _error(f"no route {self.path}"))
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        reply = self.owner.next_reply(request)
        if reply is None:
            reply = ErrorReply(HTTPStatus.BAD_REQUEST, "no scripted reply left")
        if isinstance(reply, HangUp):
            self.close_connection = True
            return None
        if isinstance(reply, ErrorReply):
            return self._send_json(reply.status, _error(reply.message))
        if isinstance(reply, EmptyReply):
            return self._send_body(HTTPStatus.OK, b"")
        if isinstance(reply, Endless):
            return self._send_endless(reply, str(request.get("model")), bool(request.get("stream")))
        raw = _raw(reply)
        model = raw.model or str(request.get("model", "test-model"))
        if request.get("stream"):
            options = request.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True
            return self._send_stream(_events(raw, model, usage=usage), drop=raw.drop)
        if raw.error is not None:
            return self._send_json(raw.error.status, _error(raw.error.message))
        if raw.malformed is not None:
            return self._send_body(HTTPStatus.OK, raw.malformed.encode())
        body = json.dumps(_completion(raw, model)).encode()
        self._send_body(HTTPStatus.OK, body, drop=raw.drop)

    def _send_json(self, status: HTTPStatus, body: JsonObject) -> None:
        self._send_body(status, json.dumps(body).encode())

    def _send_body(self, status: HTTPStatus, data: bytes, *, drop: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        # Dropped: half the body promised, then the connection closes.
        self.wfile.write(data[: len(data) // 2] if drop else data)
        self.close_connection = self.close_connection or drop

    def _send_stream(self, events: Iterator[str], *, drop: bool) -> None:
        if drop:  # chunked, so that the client sees the body never ended
            self.protocol_version = "HTTP/1.1"
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        if drop:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                self.wfile.write(_chunked(event.encode()) if drop else event.encode())
            self.wfile.flush()  # and never the last, empty chunk when dropped
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (a reply it would not take whole)
        self.close_connection = True

    def _send_endless(self, reply: Endless, model: str, streamed: bool) -> None:
        closed = self.owner.closed
        self.close_connection = True
        if not streamed:
            closed.wait()  # the answer never comes
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        piece = {"index": 0, "delta": {"content": reply.text}, "finish_reason": None}
        chunk = _envelope("chat.completion.chunk", model, [piece])
        try:
            while reply.text and not closed.wait(reply.every):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            closed.wait()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: the only end it has

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # keep test output clean


def _error(message: str) -> JsonObject:
    return {"error": {"message": message, "type": "invalid_request_error"}}


def _chunked(data: bytes) -> bytes:
    """`data` as one chunk of a body sent with `Transfer-Encoding: chunked`."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _events(reply: RawReply, model: str, *, usage: bool) -> Iterator[str]:
    """The server-sent events of a streamed reply, each with its blank line."""
    for chunk in _chunks(reply, model, usage=usage):
        yield f"data: {json.dumps(chunk)}\n\n"
    if reply.error is not None:  # as llama.cpp's server reports a failure after a 200
        error = {"code": int(reply.error.status), "message": reply.error.message}
        yield f"data: {json.dumps({'error': {**error, 'type': 'server_error'}})}\n\n"
    elif reply.malformed is not None:
        yield f"data: {reply.malformed}\n\n"
    elif reply.ends:
        yield "data: [DONE]\n\n"


def _raw(reply: str | list[tuple[str, dict[str, object]]] | RawReply) -> RawReply:
    if isinstance(reply, RawReply):
        return reply
    if isinstance(reply, str):
        return RawReply(text=reply)
    return RawReply(tool_calls=[RawToolCall.of(name, args) for name, args in reply])


def _tool_call(call: RawToolCall, arguments: str | None) -> JsonObject:
    body: JsonObject = {"type": "function", "function": {"name": call.name, "arguments": arguments}}
    return body if call.id is None else {"id": call.id, **body}


def _envelope(kind: str, model: str, choices: list[JsonObject]) -> JsonObject:
    return {"id": "chatcmpl-test", "object": kind, "created": 0, "model": model, "choices": choices}


def _completion(reply: RawReply, model: str) -> JsonObject:
    message: JsonObject = {"role": "assistant", "content": reply.text}
    if reply.tool_calls:
        message["tool_calls"] = [_tool_call(c, c.arguments) for c in reply.tool_calls]
    choice = {"index": 0, "message": message, "finish_reason": reply.finish}
    body = _envelope("chat.completion", model, [] if reply.no_choices else [choice])
    if reply.usage is not None:
        body["usage"] = reply.usage.to_json()
    return body


def _chunks(reply: RawReply, model: str, *, usage: bool = False) -> Iterator[JsonObject]:
    def chunk(delta: JsonObject, finish: str | None = None) -> JsonObject:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _envelope("chat.completion.chunk", model, [] if reply.no_choices else [choice])

    yield chunk({"role": "assistant", "content": ""})
    for piece in _text_pieces(reply.text or "", reply.piece_chars):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.tool_calls):
        for position, piece in enumerate(_pieces(call.arguments, reply.piece_chars)):
            if position == 0:
                delta = {"index": index, **_tool_call(call, piece)}
            else:
                delta = {"index": index, "function": {"arguments": piece}}
            yield chunk({"tool_calls": [delta]})
    if reply.ends:
        yield chunk({}, reply.finish)
        if usage and reply.usage is not None:  # as OpenAI sends it: a last chunk without choices
            yield {**_envelope("chat.completion.chunk", model, []), "usage": reply.usage.to_json()}


def _text_pieces(text: str, size: int) -> Iterator[str]:
    if size:
        yield from _pieces(text, size)
        return
    for position, word in enumerate(text.split(" ") if text else []):
        yield word if position == 0 else f" {word}"


@overload
def _pieces(text: str, size: int) -> Iterator[str]: ...


@overload
def _pieces(text: str | None, size: int) -> Iterator[str | None]: ...


def _pieces(text: str | None, size: int) -> Iterator[str | None]:
    if not text or not size:
        yield text
        return
    for start in range(0, len(text), size):
        yield text[start : start + size]
