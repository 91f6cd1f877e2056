"""What `orchestrator run` and `as_node` run: a folder's action (inline or in its held process),
or a tool of an MCP server's folder.

Both go through the dispatch pipeline the same way; they differ in how they
describe themselves. An MCP tool's parameters are a JSON schema: reading words
for it reads them against a model made from that schema (types, descriptions,
what is required), and the values read are sent as that model validated them,
JSON types and all (`"5"` read from words is `5` for an integer).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model

from orchestrator.sources.adapter import ActionTool
from orchestrator.sources.isolated.tool import IsolatedTool
from orchestrator.sources.mcp.tool import McpTool

# A folder's action inline, in its held process (described by a JSON schema, as an MCP tool), or
# an MCP server's tool.
Runnable: TypeAlias = ActionTool | IsolatedTool | McpTool
Rows: TypeAlias = tuple[tuple[str, Any, bool, str | None], ...]  # name, type, required, description
JSON_TYPES: dict[str, Any] = {  # types: what pydantic makes of each
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list[Any],
    "object": dict[str, Any],
}


def action_name(tool: Runnable) -> str:
    """The action's name in its folder (`send`; an MCP server's own tool name)."""
    if isinstance(tool, IsolatedTool):
        return tool.action
    return tool.spec.name if isinstance(tool, ActionTool) else tool.remote_name


def folder_name(tool: Runnable) -> str:
    """The tool name of the folder the action belongs to (`email_agent`)."""
    return tool.owner.name if isinstance(tool, ActionTool) else str((tool.metadata or {})["tool"])


def description_of(tool: Runnable) -> str:
    """What the action does, in its own words."""
    if isinstance(tool, ActionTool):
        return tool.spec.description
    return tool.description.split("\n(Part of ", 1)[0]  # without the folder's line


def visible_model(tool: Runnable) -> type[BaseModel]:
    """The parameters the caller may set, as a model (for an MCP tool: made from its schema)."""
    if isinstance(tool, ActionTool):
        return tool.scope.visible if tool.scope is not None else tool.spec.params
    schema = tool.scope.visible if tool.scope is not None else tool.full_schema
    return _schema_model(tool.name, _frozen(schema))


def hidden_names(tool: Runnable) -> frozenset[str]:
    """The parameters its scope fixes (hidden from the caller)."""
    return tool.scope.hidden if tool.scope is not None else frozenset()


def as_sent(
    tool: Runnable, pairs: Mapping[str, object], model: type[BaseModel]
) -> dict[str, object]:
    """The validated parameters as they are sent: an action's as read (its pipeline
    validates them), an MCP tool's as JSON of the values `model` made of them."""
    if isinstance(tool, ActionTool):
        return dict(pairs)
    return model.model_validate(dict(pairs)).model_dump(mode="json", exclude_unset=True)


def _frozen(schema: Mapping[str, JsonValue]) -> Rows:
    """The top-level properties as hashable rows: name, type, required, description."""
    properties = schema.get("properties")
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    rows = []
    for name, value in (properties if isinstance(properties, dict) else {}).items():
        spec = value if isinstance(value, dict) else {}
        kind = spec.get("type")
        described = spec.get("description")
        rows.append(
            (
                name,
                JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any,
                name in needed,
                described if isinstance(described, str) else None,
            )
        )
    return tuple(rows)


@cache
def _schema_model(title: str, rows: Rows) -> type[BaseModel]:
    fields: dict[str, Any] = {
        name: (
            kind if required else kind | None,
            Field(... if required else None, description=text),
        )
        for name, kind, required, text in rows
    }
    return create_model(title, __config__=ConfigDict(extra="forbid"), **fields)
