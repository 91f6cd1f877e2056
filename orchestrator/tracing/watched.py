"""The OTLP exporter, watched: whether an export failed, so that the exit can say so.

Imported only when tracing starts: OpenTelemetry's SDK is the `tracing` extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class WatchedExporter(SpanExporter):
    """The OTLP exporter, remembering whether an export failed (so the exit can say so)."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self.failed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed = True
        return result

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def give_up(self) -> None:
        """End the exporter's retries now (the exit will not wait for them)."""
        with contextlib.suppress(Exception):  # the SDK's own warning for a second shutdown
            self.exporter.shutdown()
