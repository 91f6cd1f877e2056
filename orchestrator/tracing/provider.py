"""The process's tracer: made on first use when an OTLP endpoint is set, flushed at exit.

The SDK reads the standard variables itself: `OTEL_SERVICE_NAME` and
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` (and its argument), and the OTLP
exporter's endpoint, headers, timeout and protocol. The provider is the
orchestrator's own, not the global one, so an application that embeds it keeps
its own set-up.

A collector that is down must not cost every command its exporter's retries and
a screenful of SDK warnings: the flush at exit waits `exit_timeout` seconds at
most (`ORCHESTRATOR_TRACE_EXIT_TIMEOUT_SECONDS`), and what could not be sent is
said in one line.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

    from orchestrator.tracing.watched import WatchedExporter

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
NOT_SENT = "traces could not be sent to {endpoint}"
TRACER_NAME = "orchestrator"
# The SDK's loggers that repeat every failed attempt (the exporter's retries, the batching).
SDK_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal")

_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_failed = False
_at_exit = False
_exit_timeout = 2.0


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


def set_exit_timeout(seconds: float) -> None:
    """How long the flush at exit may wait for the collector (the setting `trace_exit_timeout_seconds`)."""
    global _exit_timeout
    _exit_timeout = seconds


def shutdown() -> None:
    """Flush and stop the exporter, waiting `exit_timeout` at most; say in one line what was not sent.

    The next span starts a new provider (tests change endpoints).
    """
    global _provider, _tracer
    with _lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is None:
        return
    stopping = threading.Thread(target=provider.shutdown, name="trace-flush", daemon=True)
    stopping.start()
    stopping.join(_exit_timeout)
    exporter = _watched
    if stopping.is_alive() or (exporter is not None and exporter.failed):
        if exporter is not None:
            exporter.give_up()  # its retries end; the thread, a daemon, does not hold the exit
        line = NOT_SENT.format(endpoint=_endpoint())
        # The command line's handler prints a `person_line` alone (folders.skipped.PERSON_LINE).
        logger.warning("%s", line, extra={"person_line": f"note: {line}"})


def _start() -> TracerProvider:
    global _provider, _at_exit
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from orchestrator.tracing.resource import FixedResource
    from orchestrator.tracing.watched import WatchedExporter

    # The variables' service name wins; the SDK's own default ("unknown_service") does not.
    defaults = Resource({"service.name": DEFAULT_SERVICE})
    resource = FixedResource(defaults.merge(OTELResourceDetector().detect()))
    global _watched
    # Not the SDK's own unbounded shutdown at exit: ours (`shutdown`) waits `exit_timeout` at most.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # sampler: the variables
    _watched = WatchedExporter(_exporter())
    provider.add_span_processor(BatchSpanProcessor(_watched))
    for name in SDK_LOGGERS:  # each failed attempt: the exit says it once (`NOT_SENT`)
        logging.getLogger(name).setLevel(logging.CRITICAL)
    if not _at_exit:
        _at_exit = True
        atexit.register(shutdown)
    _provider = provider
    return provider


def _endpoint() -> str:
    return next((os.environ[name] for name in ENDPOINTS if os.environ.get(name)), "the collector")


_watched: WatchedExporter | None = None


def _exporter() -> SpanExporter:
    protocol = next(
        (os.environ[name] for name in PROTOCOLS if os.environ.get(name)), "http/protobuf"
    )
    if protocol == "grpc":
        try:
            # Not in the `tracing` extra (grpcio is large): absent where types are checked.
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # pyright: ignore[reportMissingImports]  # see above
                OTLPSpanExporter,
            )
        except ImportError:
            logger.warning(NO_GRPC)
        else:
            return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()
