"""What an MCP server is approved as: how it is launched, who it says it is, and its tools.

The digest covers everything that reaches the model or runs: the launch
(command, arguments, variable names; or URL and header names), the server's
`serverInfo` and `instructions`, and every tool's name, title, description,
input and output schemas and annotations. A server that changes any of it
after approval (the "rug pull": a harmless tool that later describes itself
differently) is blocked until the person approves the change, which is shown
tool by tool.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, JsonValue

if TYPE_CHECKING:  # the SDK loads when a server starts
    from mcp.types import Implementation, Tool

TOOL_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations")
MAX_SHOWN = 160  # characters of a changed text shown in a question


class ToolDefinition(BaseModel):
    """One tool as the server lists it (the fields that are approved)."""

    model_config = ConfigDict(frozen=True)

    name: str
    title: str | None = None
    description: str | None = None
    inputSchema: dict[str, JsonValue] = Field(default_factory=dict)  # noqa: N815 (MCP's name)
    outputSchema: dict[str, JsonValue] | None = None  # noqa: N815
    annotations: dict[str, JsonValue] | None = None

    @classmethod
    def of(cls, tool: Tool) -> ToolDefinition:
        """The approved part of a tool from `tools/list`."""
        annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else None
        return cls(
            name=tool.name,
            title=tool.title,
            description=tool.description,
            inputSchema=tool.inputSchema,
            outputSchema=tool.outputSchema,
            annotations=annotations or None,
        )


class ServerDefinition(BaseModel):
    """A server as approved: its launch, its `serverInfo` and `instructions`, its tools by name."""

    launch: dict[str, JsonValue]
    server_info: dict[str, JsonValue] = Field(default_factory=dict)
    instructions: str | None = None
    tools: dict[str, ToolDefinition] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        *,
        launch: dict[str, JsonValue],
        info: Implementation,
        instructions: str | None,
        tools: Iterable[Tool],
    ) -> ServerDefinition:
        """The definition of a server as it introduced itself just now."""
        return cls(
            launch=launch,
            server_info=info.model_dump(mode="json", exclude_none=True),
            instructions=instructions,
            tools={
                tool.name: ToolDefinition.of(tool) for tool in sorted(tools, key=lambda t: t.name)
            },
        )

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the whole definition."""
        return hashlib.sha256(canonical(self.model_dump(mode="json")).encode()).hexdigest()


def canonical(value: object) -> str:
    """JSON with sorted keys and no spaces: the same definition always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def changes(before: ServerDefinition, after: ServerDefinition) -> list[str]:
    """What changed from `before` to `after`, a line per server field or tool."""
    lines = [
        f"{label} changed: {_short(getattr(before, field))} -> {_short(getattr(after, field))}"
        for field, label in (
            ("launch", "how it is launched"),
            ("server_info", "serverInfo"),
            ("instructions", "instructions"),
        )
        if getattr(before, field) != getattr(after, field)
    ]
    for name in sorted(before.tools.keys() | after.tools.keys()):
        old, new = before.tools.get(name), after.tools.get(name)
        if old is None:
            lines.append(f"+ new tool {name}: {_short(new.description if new else None)}")
        elif new is None:
            lines.append(f"- tool {name} removed")
        elif old != new:
            lines.extend(_tool_changes(old, new))
    return lines


def _tool_changes(old: ToolDefinition, new: ToolDefinition) -> list[str]:
    lines: list[str] = []
    for field in TOOL_FIELDS:
        was, now = getattr(old, field), getattr(new, field)
        if was != now:
            lines.append(f"~ tool {old.name}: {field} {_short(was)} -> {_short(now)}")
    return lines


def _short(value: object) -> str:
    text = value if isinstance(value, str) else canonical(value)
    text = " ".join(text.split())
    return repr(text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…")
