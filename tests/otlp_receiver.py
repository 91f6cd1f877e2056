"""A collector of OTLP/HTTP traces on 127.0.0.1, for the tests of tracing (and LangSmith's runs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.server_thread import ServedOnThread


@dataclass
class ReceivedSpan:
    """One exported span: its name, ids, parent, attributes (values as Python values), status
    description and events' attributes."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, object]
    links: list[str] = field(default_factory=list)
    status: str = ""
    events: list[dict[str, object]] = field(default_factory=list)


class Receiver(ServedOnThread):
    """Accepts every POST; `/v1/traces` bodies are read as OTLP spans, the others kept raw."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.bodies: list[tuple[str, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received(self.path, body)
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def do_GET(self) -> None:  # noqa: N802 (LangSmith asks for /info)
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return

        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), Handler))

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def received(self, path: str, body: bytes) -> None:
        self.bodies.append((path, body))
        if path.endswith("/v1/traces"):
            self.spans.extend(_spans(body))

    def named(self, prefix: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name.startswith(prefix)]

    def ancestors(self, span: ReceivedSpan) -> list[ReceivedSpan]:
        by_id = {s.span_id: s for s in self.spans}
        found, parent = [], by_id.get(span.parent_id)
        while parent is not None:
            found.append(parent)
            parent = by_id.get(parent.parent_id)
        return found


def _spans(body: bytes) -> list[ReceivedSpan]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [
        ReceivedSpan(
            name=span.name,
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_id=span.parent_span_id.hex(),
            attributes={a.key: _value(a.value) for a in span.attributes},
            links=[link.span_id.hex() for link in span.links],
            status=span.status.message,
            events=[{a.key: _value(a.value) for a in event.attributes} for event in span.events],
        )
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None
