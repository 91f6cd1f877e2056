"""OpenTelemetry traces of turns, model calls and tool calls, by the standard `OTEL_*` switches.

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set: then
nothing of OpenTelemetry is imported and no span is made.
"""
