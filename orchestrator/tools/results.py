"""The envelope every tool outcome travels in: results, statuses and errors alike."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Literal, TypedDict

from pydantic import BaseModel, Field, JsonValue

from orchestrator.errors import ToolError
from orchestrator.usage.billing import Billing

__all__ = [
    "HANDLE_MARK",
    "HANDLE_NOTE",
    "KEPT_CHARS",
    "READ_RESULT_TOOL",
    "RESULT_HANDLE",
    "TRUNCATION_NOTE",
    "Billing",
    "ResultFields",
    "ToolResult",
    "result_from_output",
]

ResultStatus = Literal["success", "partial", "failure"]
EnvelopeType = Literal["status", "result", "error"]

TRUNCATION_NOTE = (
    "\n[truncated: the result was {length} characters, over the limit of {limit}; "
    "ask for less (a narrower query, fewer items) to see the rest]"
)
# A result kept whole by handle (see `dispatch.large_results`): the metadata keys that say so,
# the built-in tool that reads it, and the note the model reads after the preview.
RESULT_HANDLE = "result_handle"
KEPT_CHARS = "result_kept_chars"
READ_RESULT_TOOL = "read_result"
# What every note of a kept result says: in a tool message, a background job's report, or a
# plan's report (where it is inside a JSON string: no quote in it, which JSON would escape).
HANDLE_MARK = f"call {READ_RESULT_TOOL} with handle "
HANDLE_NOTE = (
    "\n[cut: the result is {length} characters; above are the first {limit}. It is kept as "
    "{handle}: " + HANDLE_MARK + '"{handle}" and offset {limit} to read on, or with a '
    "pattern to search it{dropped}]"
)
# What the model reads of a result: its fields, then the keys of its metadata (when the
# result was made, whose service answered), as the `run` envelope has them.
# (Sets, not frozensets, because pydantic's `include` is typed so; never changed.)
MODEL_FIELDS: set[str] = {
    "type",
    "status",
    "message",
    "data",
    "details",
    "next_actions",
    "error_code",
    "recoverable",
    "retry_strategy",
}
_WITHOUT_DATA = MODEL_FIELDS - {"data"}
TIMESTAMP = "timestamp"
MODEL_METADATA = (TIMESTAMP, "provider")
DROPPED_NOTE = " (only its first {kept} characters were kept: the rest was over the size limit)"


class ResultFields(TypedDict, total=False):
    """The fields of a `ToolResult` a tool sets beside its message (its ids come from the request).

    `data` and `metadata` are whatever the tool built (rows of `dict[str, object]`, say):
    `ToolResult` checks them as JSON when it is made, which a static type cannot say
    of a value built from a database row.
    """

    type: EnvelopeType
    status: ResultStatus
    data: object
    metadata: Mapping[str, object]
    next_actions: list[str]
    details: Mapping[str, object]
    billing: Billing | None
    error_code: str | None
    recoverable: bool | None
    retry_strategy: str | None


class ToolResult(BaseModel):
    """What a tool call produced, with the ids that tie it into the request tree."""

    type: EnvelopeType = "result"
    request_id: str | None = None
    parent_request_id: str | None = None
    status: ResultStatus = "success"
    message: str = ""
    data: JsonValue = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    next_actions: list[str] = Field(default_factory=list)
    details: dict[str, JsonValue] = Field(default_factory=dict)  # what else a failure knows
    billing: Billing | None = None
    error_code: str | None = None
    recoverable: bool | None = None
    retry_strategy: str | None = None

    @classmethod
    def from_error(cls, error: ToolError) -> ToolResult:
        """The error envelope for a failed call."""
        return cls(
            type="error",
            status="failure",
            message=str(error),
            error_code=error.code,
            recoverable=error.recoverable,
            retry_strategy=error.retry_strategy,
            details=error.details,
        )

    def __getitem__(self, field: str) -> object:
        """`result["status"]`, as code written for the original design's plain dicts reads it."""
        if field not in type(self).model_fields:
            raise KeyError(field)
        return getattr(self, field)

    @property
    def handle(self) -> str | None:
        """The handle the whole result is kept under, when it was too long for the model."""
        handle = self.metadata.get(RESULT_HANDLE)
        return handle if isinstance(handle, str) else None

    def to_model_text(self, *, max_chars: int, include_data: bool = True) -> str:
        """JSON for the model: only the fields it can use, cut past `max_chars` with a note.

        A result kept by handle ends its preview with the handle and how to read on.
        `include_data` False leaves `data` out (the level's `include_tool_data`).
        """
        text = self.model_text(include_data=include_data)
        if len(text) <= max_chars:
            return text
        handle = self.handle
        if handle is None:
            return text[:max_chars] + TRUNCATION_NOTE.format(length=len(text), limit=max_chars)
        kept = self.metadata.get(KEPT_CHARS)
        dropped = (
            DROPPED_NOTE.format(kept=kept) if isinstance(kept, int) and kept < len(text) else ""
        )
        note = HANDLE_NOTE.format(length=len(text), limit=max_chars, handle=handle, dropped=dropped)
        return text[:max_chars] + note

    def model_text(self, *, include_data: bool = True) -> str:
        """The whole JSON the model reads of this result (`to_model_text` cuts it)."""
        body = self.model_dump(
            mode="json",
            include=MODEL_FIELDS if include_data else _WITHOUT_DATA,
            exclude_defaults=True,
        )
        # The status leads and is always said, even when it is the default; the metadata
        # follows, so that a result cut for length still says when it was made.
        head: dict[str, object] = {"status": self.status}
        metadata = {key: self.metadata[key] for key in MODEL_METADATA if key in self.metadata}
        if metadata:
            head["metadata"] = metadata
        return json.dumps({**head, **body}, ensure_ascii=False, default=str)

    def stamped(self, at: datetime) -> ToolResult:
        """This result with the time it was made in its metadata, unless it says one already
        (a cached result keeps the time its data is from)."""
        if TIMESTAMP in self.metadata:
            return self
        when = at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return self.model_copy(update={"metadata": {**self.metadata, TIMESTAMP: when}})


def result_from_output(output: object) -> ToolResult:
    """Wrap whatever a LangChain tool returned in the envelope."""
    if isinstance(output, ToolResult):
        return output
    if isinstance(output, str):
        return ToolResult(message=output)
    return ToolResult(data=_jsonable(output))


def _jsonable(value: object) -> JsonValue:
    return json.loads(json.dumps(value, default=str))
