"""Spans of the orchestrator's own work, each a no-op when tracing is off.

Attribute names follow OpenTelemetry's GenAI semantic conventions where they
have one (`gen_ai.*`); the orchestrator's own are `orchestrator.*`. Message and
argument content is recorded only with `ORCHESTRATOR_TRACE_CONTENT=1` (the setting
`trace_content`, applied by the runtime), redacted as the request log redacts it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

from orchestrator.redact import redact
from orchestrator.tracing.provider import tracer

if TYPE_CHECKING:
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Tracer

Attribute: TypeAlias = str | bool | int | float
CONTENT_CHARS = 8_000  # of one attribute's content: a span is no archive
STATUS_CHARS = 200  # of a failure's message as a span's status description
_content = False


def record_content(on: bool) -> None:
    """Whether message and argument content goes into spans (the setting `trace_content`)."""
    global _content
    _content = on


def content_recorded() -> bool:
    """Whether message and argument content goes into spans (`ORCHESTRATOR_TRACE_CONTENT=1`)."""
    return _content


@contextmanager
def span(
    name: str,
    attributes: Mapping[str, Attribute | None] | None = None,
    *,
    kind: str = "INTERNAL",
    links: Sequence[SpanContext] = (),
) -> Iterator[Span | None]:
    """A span of `name` around the block (a child of the current one); None when tracing is off.

    An exception leaving the block marks the span an error of its type (`error.type`); its
    message, which may hold anything the call saw, is recorded only with content on.
    """
    current = tracer()
    if current is None:
        yield None
        return
    otel = _otel()
    # Not the SDK's `start_as_current_span`: a span of `recorded` (the same span, exported
    # the same way, for a fifth of the work) and the context set by hand.
    opened = otel.start(
        current,
        name,
        kind=otel.kinds[kind],
        attributes=_present(attributes) if attributes else None,
        links=[otel.link(linked) for linked in links] if links else (),
    )
    token = otel.attach(otel.in_context(opened))
    try:
        yield opened
    except BaseException as error:
        error_type, said = type(error).__qualname__, str(error)
        opened.set_attribute("error.type", error_type)
        mark_failed(opened, code=error_type, message=lambda: said)
        if content_recorded():
            opened.record_exception(error, attributes={"exception.message": redact(said)})
        raise
    finally:
        otel.detach(token)
        opened.end()


def annotate(attributes: Mapping[str, Attribute | None]) -> None:
    """Add `attributes` to the current span, if one is being recorded (a decision, a retry)."""
    if tracer() is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(_present(attributes))


def set_content(target: Span | None, key: str, value: Callable[[], object]) -> None:
    """Record `value()` (text, or JSON of it) under `key` when content is recorded; redacted, cut.

    A function, so that nothing is made of the content when it is not recorded.
    """
    if target is None or not content_recorded():
        return
    made = value()
    text = made if isinstance(made, str) else json.dumps(made, ensure_ascii=False, default=str)
    target.set_attribute(key, redact(text)[:CONTENT_CHARS])


def current_context() -> SpanContext | None:
    """The current span's context, to link later work to (a background job to its turn)."""
    if tracer() is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None


def traceparent() -> str | None:
    """The current span as a W3C `traceparent`, for work another process does later (a job)."""
    if tracer() is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def continued(headers: Mapping[str, str]) -> Iterator[None]:
    """Within the block, the trace a request's `traceparent` (and `tracestate`) header names is
    the current one: spans made in it, and in tasks started in it, are its children."""
    if "traceparent" not in headers or tracer() is None:
        yield
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    otel = _otel()
    token = otel.attach(TraceContextTextMapPropagator().extract(dict(headers)))
    try:
        yield
    finally:
        otel.detach(token)


def linked(parent: str | None) -> list[SpanContext]:
    """The span a `traceparent` names, to link to (none when tracing is off or it is None)."""
    if parent is None or tracer() is None:
        return []
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = TraceContextTextMapPropagator().extract({"traceparent": parent})
    found = trace.get_current_span(context).get_span_context()
    return [found] if found.is_valid else []


def mark_failed(target: Span | None, *, code: str, message: Callable[[], str]) -> None:
    """Set the span's status to an error described by `code` (a call that failed).

    The failure's `message()` (redacted, cut) describes it instead only when content is
    recorded: it may hold user data, which leaves the process only when asked for.
    """
    if target is None:
        return
    from opentelemetry.trace import Status, StatusCode

    description = redact(message())[:STATUS_CHARS] if content_recorded() else code
    target.set_status(Status(StatusCode.ERROR, description))


class _Starter(Protocol):
    """`recorded.start`'s signature."""

    def __call__(
        self,
        tracer: Tracer,
        name: str,
        *,
        kind: SpanKind,
        attributes: Mapping[str, Attribute] | None,
        links: Sequence[Link],
    ) -> Span: ...


class _OpenTelemetry(NamedTuple):
    """What `span` uses of OpenTelemetry's API, imported once (not at each span)."""

    attach: Callable[[Context], Token[Context]]
    detach: Callable[[Token[Context]], None]
    in_context: Callable[[Span], Context]
    link: type[Link]
    kinds: type[SpanKind]
    start: _Starter


@cache
def _otel() -> _OpenTelemetry:
    from opentelemetry import context
    from opentelemetry.trace import Link, SpanKind, set_span_in_context

    from orchestrator.tracing.recorded import start

    return _OpenTelemetry(
        context.attach, context.detach, set_span_in_context, Link, SpanKind, start
    )


def _present(attributes: Mapping[str, Attribute | None]) -> dict[str, Attribute]:
    return {key: value for key, value in attributes.items() if value is not None}
