"""An MCP tool call's result in the orchestrator's envelope.

Text becomes the message, `structuredContent` the data (and its `billing`,
if it has one, the call's billing); images, audio and binary resources
become a short note, since the model gets text. A result whose only content
is one JSON object or array as text (as servers on older SDKs send their
structured results) has that JSON as its data, not as a string in the message.
"""

from __future__ import annotations

import json

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import JsonValue, ValidationError

from orchestrator.tools.results import Billing, ToolResult

ERROR_CODE = "mcp_tool_error"
NOT_SHOWN = "[{kind} ({mime}, {size}) not shown]"
LINK = "[resource {uri}{name}]"
EMPTY_ERROR = "the MCP tool reported an error without a message"


def tool_result(result: CallToolResult) -> ToolResult:
    """The envelope for `result`: a failure when the server said `isError`."""
    message = "\n".join(filter(None, (_text(block) for block in result.content)))
    data: JsonValue = result.structuredContent
    if data is not None and _same_json(message, data):
        message = ""  # servers send structured results as text too: once is enough
    elif data is None and not result.isError and (parsed := _json_text(result.content)) is not None:
        data, message = parsed, ""
    if result.isError:
        return ToolResult(
            type="error",
            status="failure",
            message=message or EMPTY_ERROR,
            data=data,
            error_code=ERROR_CODE,
            recoverable=False,
        )
    return ToolResult(message=message, data=data, billing=_billing(result.structuredContent))


def _text(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return NOT_SHOWN.format(kind=kind, mime=block.mimeType, size=_size(block.data))
    if isinstance(block, ResourceLink):
        return LINK.format(uri=block.uri, name=f" {block.name}" if block.name else "")
    if isinstance(block, EmbeddedResource):  # pyright: ignore[reportUnnecessaryIsInstance]  # a newer SDK's blocks fall through
        return _resource(block.resource)
    return ""


def _resource(resource: TextResourceContents | BlobResourceContents) -> str:
    if isinstance(resource, TextResourceContents):
        return resource.text
    mime = resource.mimeType or "binary"
    return NOT_SHOWN.format(kind=f"resource {resource.uri}", mime=mime, size=_size(resource.blob))


def _size(base64: str) -> str:
    size = len(base64) * 3 // 4
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"


def _same_json(text: str, data: JsonValue) -> bool:
    try:
        return bool(text) and json.loads(text) == data
    except ValueError:
        return False


def _json_text(content: list[ContentBlock]) -> JsonValue:
    """The JSON object or array that is all of `content` (one text block), else None."""
    if len(content) != 1 or not isinstance(content[0], TextContent):
        return None
    text = content[0].text.strip()
    if not text.startswith(("{", "[")):  # a bare number or word is a message, not data
        return None
    try:
        parsed: JsonValue = json.loads(text)
    except (ValueError, RecursionError):  # nested past what the parser takes: text it stays
        return None
    return parsed if isinstance(parsed, dict | list) else None


def _billing(structured: dict[str, object] | None) -> Billing | None:
    """`billing: {total_cost_usd, credits}` of a structured result; an invalid one is ignored."""
    billing = (structured or {}).get("billing")
    if not isinstance(billing, dict):
        return None
    try:
        return Billing.model_validate(billing)
    except ValidationError:
        return None
