"""One action's outcome in the two forms a caller may want: a structured envelope and a readable string.

An agent's model gets a call's result as text (`ToolResult.to_model_text`); a
workflow node, `orchestrator run --json` and scripts get the `Envelope`:

    {success, message, data,
     metadata: {operation, tool, action, request_id, timestamp, duration_ms, provider,
                result_handle},
     error: {code, message, details} | null}

and a person at a terminal its readable form (`Envelope.text`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import BaseModel, Field, JsonValue

from orchestrator.tools.results import ToolResult

__all__ = ["Envelope", "EnvelopeError", "EnvelopeMetadata"]

DETAIL_FIELDS = ("recoverable", "retry_strategy", "next_actions")


class EnvelopeMetadata(BaseModel):
    """Which action ran, as which request, when, for how long, and whose service answered."""

    operation: str  # "<tool>.<action>"
    tool: str
    action: str
    request_id: str | None
    timestamp: str  # ISO 8601, UTC: when the action was started
    duration_ms: float
    provider: str | None = None  # the service behind the action, when the tool names one
    result_handle: str | None = None  # where the whole result is kept, when it was too long for a model


class EnvelopeError(BaseModel):
    """Why an action failed: a stable code, one readable message, and what else is known."""

    code: str
    message: str
    details: dict[str, JsonValue] = Field(default_factory=dict)


class Envelope(BaseModel):
    """The structured outcome of one action (see the module's docstring)."""

    success: bool
    message: str = ""
    data: JsonValue = None
    metadata: EnvelopeMetadata
    error: EnvelopeError | None = None

    @classmethod
    def of(
        cls,
        result: ToolResult,
        *,
        tool: str,
        action: str,
        started: datetime,
        duration_ms: float,
    ) -> Envelope:
        """`result` of `tool`'s `action`, started at `started` and run for `duration_ms`."""
        provider = result.metadata.get("provider")
        metadata = EnvelopeMetadata(
            operation=f"{tool}.{action}",
            tool=tool,
            action=action,
            request_id=result.request_id,
            timestamp=started.astimezone(UTC).isoformat(),
            duration_ms=round(duration_ms, 3),
            provider=str(provider) if provider is not None else None,
            result_handle=result.handle,
        )
        error = None
        if result.status == "failure":
            said = result.model_dump(mode="json", include=set(DETAIL_FIELDS), exclude_defaults=True)
            details = {**result.details, **said}
            error = EnvelopeError(
                code=result.error_code or "error", message=result.message, details=details
            )
        return cls(
            success=result.status != "failure",
            message=result.message,
            data=result.data,
            metadata=metadata,
            error=error,
        )

    def text(self) -> str:
        """The readable form: the message, then the data a line per field; or the error."""
        if self.error is not None:
            return f"error ({self.error.code}): {self.error.message}"
        lines = [self.message] if self.message else []
        if isinstance(self.data, dict):
            lines += [f"{key}: {_shown(value)}" for key, value in self.data.items()]
        elif self.data is not None:
            lines.append(_shown(self.data))
        return "\n".join(lines) or "done"


def _shown(value: JsonValue) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        strings = [item for item in value if isinstance(item, str)]
        if len(strings) == len(value):
            return ", ".join(strings)
    return json.dumps(value, ensure_ascii=False, default=str)
