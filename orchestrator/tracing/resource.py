"""The process's OpenTelemetry resource, its hash computed once.

The OTLP encoder groups every span of a batch by its resource, hashing it once a
span; the SDK's `Resource.__hash__` serialises all its attributes to JSON each
time (a tenth of the encoding's cost). A resource is immutable: its hash is too.
Imported only when tracing starts: OpenTelemetry's SDK is the `tracing` extra.
"""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource


class FixedResource(Resource):
    """A `Resource` whose hash is computed once (its attributes cannot change)."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash
