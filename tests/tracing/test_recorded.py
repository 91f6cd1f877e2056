"""The orchestrator's spans (tracing/recorded) reach the collector as the SDK's own spans would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import context, trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span
from opentelemetry.trace import SpanKind, Status, StatusCode

from orchestrator.tracing import provider
from orchestrator.tracing.spans import annotate, linked, record_content, span
from tests.otlp_receiver import Receiver

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with Receiver() as running:
        provider.shutdown()
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", running.url)
        record_content(True)
        yield running
        record_content(False)
        provider.shutdown()


def exported(receiver: Receiver) -> list[ResourceSpans]:
    provider.flush()
    found: list[ResourceSpans] = []
    for _, body in receiver.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found.extend(request.resource_spans)
    receiver.bodies.clear()
    return found


def ours() -> None:
    with (
        pytest.raises(KeyError),
        span("outer", {"a": 1, "gone": None}, kind="CLIENT", links=linked(PARENT)),
        span("inner", {"b": "x"}),
    ):
        annotate({"c": True})
        raise KeyError("boom")


def the_sdks() -> None:
    """What `ours` does, by the SDK's own live spans (as `spans.span` made them before)."""
    tracer = provider.tracer()
    assert tracer is not None
    (link,) = [trace.Link(found) for found in linked(PARENT)]
    outer = tracer.start_span("outer", kind=SpanKind.CLIENT, attributes={"a": 1}, links=[link])
    held = context.attach(trace.set_span_in_context(outer))
    inner = tracer.start_span("inner", attributes={"b": "x"})
    held_inner = context.attach(trace.set_span_in_context(inner))
    inner.set_attributes({"c": True})
    error = KeyError("boom")
    for opened in (inner, outer):
        opened.set_attribute("error.type", "KeyError")
        opened.set_status(Status(StatusCode.ERROR, "'boom'"))
        opened.record_exception(error, attributes={"exception.message": "'boom'"})
    context.detach(held_inner)
    inner.end()
    context.detach(held)
    outer.end()


def comparable(resource_spans: list[ResourceSpans]) -> list[Span]:
    """The spans with what differs from run to run (ids, times, stack lines) cleared."""
    spans = [s for r in resource_spans for scope in r.scope_spans for s in scope.spans]
    for one in spans:
        for field in (
            "trace_id",
            "span_id",
            "parent_span_id",
            "start_time_unix_nano",
            "end_time_unix_nano",
        ):
            one.ClearField(field)  # type: ignore[arg-type]
        for event in one.events:
            event.ClearField("time_unix_nano")
            kept = [a for a in event.attributes if a.key != "exception.stacktrace"]
            event.ClearField("attributes")
            event.attributes.extend(kept)
    return spans


def test_a_span_reaches_the_collector_as_the_sdks_own_would(receiver: Receiver):
    ours()
    mine = exported(receiver)
    the_sdks()
    theirs = exported(receiver)

    (inner, outer) = [s for r in mine for scope in r.scope_spans for s in scope.spans]
    assert inner.parent_span_id == outer.span_id and inner.trace_id == outer.trace_id
    assert outer.links[0].span_id.hex() == "b7ad6b7169203331"
    assert [r.resource for r in mine] == [r.resource for r in theirs]
    assert [s.scope for r in mine for s in r.scope_spans] == [
        s.scope for r in theirs for s in r.scope_spans
    ]
    assert comparable(mine) == comparable(theirs)
    assert any(e.name == "exception" for e in inner.events), "with content on, the exception"


def test_the_sampler_variables_decide_as_they_do_for_the_sdks_spans(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    provider.shutdown()
    with span("unsampled") as opened:
        assert opened is not None and not opened.is_recording()
        assert opened.get_span_context().is_valid, "its ids still propagate"

    assert exported(receiver) == []
