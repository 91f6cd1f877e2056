"""The process's tracer: made on first use when an OTLP endpoint is set, flushed at exit.

The SDK reads the standard variables itself: `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` (and its argument), and the OTLP
exporter's endpoint, headers, timeout and protocol. The provider is the
orchestrator's own, not the global one, so an application that embeds it keeps
its own set-up.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

logger = logging.getLogger(__name__)

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
DEFAULT_SERVICE = "orchestrator"
NOT_INSTALLED = (
    "tracing is off: OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed "
    "(pip install -e '.[tracing]', as scripts/setup.sh does)"
)
NO_GRPC = (
    "OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc (not installed): "
    "exporting over HTTP (http/protobuf) to the same endpoint instead"
)
TRACER_NAME = "orchestrator"

_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_failed = False
_at_exit = False


def enabled() -> bool:
    """Whether traces are exported: an OTLP endpoint is set (and OpenTelemetry could load)."""
    return not _failed and any(os.environ.get(name) for name in ENDPOINTS)


def tracer() -> Tracer | None:
    """The orchestrator's tracer, made on first use; None when tracing is off."""
    global _tracer, _failed
    if _tracer is not None or not enabled():
        return _tracer
    with _lock:
        if _tracer is None:
            try:
                _tracer = _start().get_tracer(TRACER_NAME)
            except ImportError:
                _failed = True
                logger.warning(NOT_INSTALLED)
    return _tracer


def flush(*, timeout_millis: int = 10_000) -> None:
    """Export what is waiting (the end of a command, a test)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis)


def shutdown() -> None:
    """Flush and stop the exporter; the next span starts a new provider (tests change endpoints)."""
    global _provider, _tracer
    with _lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def _start() -> TracerProvider:
    global _provider, _at_exit
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # The variables' service name wins; the SDK's own default ("unknown_service") does not.
    resource = Resource({"service.name": DEFAULT_SERVICE}).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER
    provider.add_span_processor(BatchSpanProcessor(_exporter()))
    if not _at_exit:
        _at_exit = True
        atexit.register(shutdown)
    _provider = provider
    return provider


def _exporter():  # noqa: ANN202 (an OpenTelemetry SpanExporter, imported lazily)
    protocol = next(
        (os.environ[name] for name in PROTOCOLS if os.environ.get(name)), "http/protobuf"
    )
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            logger.warning(NO_GRPC)
        else:
            return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()
