"""A span kept as plain values while it runs, handed to the SDK's processors when it ends.

The SDK's own live span guards every attribute with a lock and checks each value's
type when it is set, then copies itself into a `ReadableSpan` at its end: about
250 Python calls a span, a tenth of a zero-latency model round trip. The
orchestrator's spans are written by its own code alone, with values of the four
types OTLP carries (`spans.Attribute`), and each is ended by the task that opened
it. So a span here is a dict and a few fields until its end, when it becomes the
same `ReadableSpan` the SDK would have made, given to the same processors (the
batching one, and any an embedding application added). The tracer's sampler and id
generator decide, as they do for the SDK's spans.

Imported only when tracing starts: OpenTelemetry's SDK is the `tracing` extra.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import Event, ReadableSpan, Tracer
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

# The flags a span's context carries, by (sampled, trace id random), made once.
FLAGS = {
    (sampled, random): TraceFlags(
        (TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        | (TraceFlags.RANDOM_TRACE_ID if random else TraceFlags.DEFAULT)
    )
    for sampled in (True, False)
    for random in (True, False)
}


def start(
    tracer: trace.Tracer,
    name: str,
    *,
    kind: SpanKind,
    attributes: Mapping[str, types.AttributeValue] | None,
    links: Sequence[Link],
) -> trace.Span:
    """A span of `name`, a child of the current one, begun now; non-recording if not sampled.

    A tracer not of the SDK (`OTEL_SDK_DISABLED` gives a no-op one) makes its own.
    """
    if not isinstance(tracer, Tracer):
        return tracer.start_span(name, kind=kind, attributes=attributes, links=links)
    parent = trace.get_current_span().get_span_context()
    if not parent.is_valid:
        parent = None
    if parent:
        trace_id, random = parent.trace_id, parent.trace_flags.random_trace_id
    else:
        trace_id = tracer.id_generator.generate_trace_id()
        random = tracer.id_generator.is_trace_id_random()
    decision = tracer.sampler.should_sample(None, trace_id, name, kind, attributes, links)
    context = SpanContext(
        trace_id,
        tracer.id_generator.generate_span_id(),
        is_remote=False,
        trace_flags=FLAGS[decision.decision.is_sampled(), random],
        trace_state=decision.trace_state,
    )
    if not decision.decision.is_recording():
        return trace.NonRecordingSpan(context)
    held: dict[str, types.AttributeValue] = {**(decision.attributes or {}), **(attributes or {})}
    return RecordedSpan(
        tracer, name, context, parent=parent, kind=kind, attributes=held, links=links
    )


class RecordedSpan(trace.Span):
    """A recording span held as plain values; a `ReadableSpan` for the processors at its end."""

    def __init__(
        self,
        tracer: Tracer,
        name: str,
        context: SpanContext,
        *,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: dict[str, types.AttributeValue],
        links: Sequence[Link],
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._links = links
        self._events: list[Event] = []
        self._status = Status(StatusCode.UNSET)
        self._start = time.time_ns()
        self._ended = False

    def end(self, end_time: int | None = None) -> None:
        """Hand the finished span to the tracer's processors (once)."""
        if self._ended:
            return
        self._ended = True
        self._tracer.span_processor.on_end(
            ReadableSpan(
                self._name,
                self._context,
                self._parent,
                self._tracer.resource,
                self._attributes,
                self._events,
                self._links,
                self._kind,
                status=self._status,
                start_time=self._start,
                end_time=end_time or time.time_ns(),
                instrumentation_scope=self._tracer._instrumentation_scope,  # pyright: ignore[reportPrivateUsage]  # the SDK's span reads the same
            )
        )

    def get_span_context(self) -> SpanContext:
        """This span's ids, for its children and for propagation."""
        return self._context

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        """Record `attributes` (values of OTLP's types, as the orchestrator's code sets)."""
        if not self._ended:
            self._attributes.update(attributes)

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        """Record one attribute."""
        if not self._ended:
            self._attributes[key] = value

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        """Record an event (an exception, with content on)."""
        if not self._ended:
            self._events.append(Event(name, attributes, timestamp or time.time_ns()))

    def update_name(self, name: str) -> None:
        """Rename the span."""
        self._name = name

    def is_recording(self) -> bool:
        """Whether attributes set now are kept: until the span ends."""
        return not self._ended

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """Set the span's status (an error's code or description)."""
        self._status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """Record `exception` as the conventions' `exception` event."""
        recorded: dict[str, types.AttributeValue] = {
            "exception.type": type(exception).__name__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        self.add_event("exception", recorded | dict(attributes or {}), timestamp)
