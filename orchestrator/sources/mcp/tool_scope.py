"""AI scope for MCP tools: `tool_config.yaml`'s `parameters` applied to JSON-schema parameters.

As for folder tools (see `folders.scope`): `{value: ...}` fixes a parameter of
every tool of the server that has it, so the model neither sees nor sets it;
`ai` leaves it to the model. Naming a parameter no tool has, or a value its
schema refuses, fails the folder's load.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from orchestrator.errors import ToolLoadError
from orchestrator.folders.tool_config import FixedValue, ParameterChoice
from orchestrator.sources.mcp.definitions import ToolDefinition

UNKNOWN = "{server}: tool_config.yaml names parameter {name}, which none of its tools has{known}"
BAD_VALUE = (
    "{server}: tool_config.yaml's value for parameter {name} of {tool} is invalid: {problem}"
)


@dataclass(frozen=True)
class JsonScope:
    """What the model controls of one MCP tool's parameters (see `pipeline.scope`)."""

    visible: dict[str, JsonValue]  # the input schema less the hidden properties
    fixed: dict[str, JsonValue]
    hidden: frozenset[str]


def json_scopes(
    server: str, tools: Mapping[str, ToolDefinition], choices: Mapping[str, ParameterChoice]
) -> dict[str, JsonScope]:
    """The scope of each tool (by its name on the server) that has a fixed parameter."""
    fixed = {
        name: choice.value for name, choice in choices.items() if isinstance(choice, FixedValue)
    }
    known = {name for tool in tools.values() for name in _properties(tool.inputSchema)}
    for name in choices:
        if name not in known:
            listed = f" (their parameters: {', '.join(sorted(known))})" if known else ""
            raise ToolLoadError(UNKNOWN.format(server=server, name=name, known=listed))
    scopes: dict[str, JsonScope] = {}
    for tool in tools.values():
        mine = {
            name: value for name, value in fixed.items() if name in _properties(tool.inputSchema)
        }
        if mine:
            _check(server, tool, mine)
            scopes[tool.name] = JsonScope(_without(tool.inputSchema, mine), mine, frozenset(mine))
    return scopes


def _properties(schema: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _without(
    schema: Mapping[str, JsonValue], hidden: Mapping[str, JsonValue]
) -> dict[str, JsonValue]:
    visible = dict(schema)
    visible["properties"] = {k: v for k, v in _properties(schema).items() if k not in hidden}
    required = schema.get("required")
    if isinstance(required, list):
        visible["required"] = [name for name in required if name not in hidden]
    return visible


def _check(server: str, tool: ToolDefinition, values: Mapping[str, JsonValue]) -> None:
    from jsonschema import validators  # only for a folder that fixes a parameter's value

    properties = _properties(tool.inputSchema)
    for name, value in values.items():
        schema = properties[name]
        if not isinstance(schema, dict):
            continue
        error = next(validators.validator_for(schema)(schema).iter_errors(value), None)
        if error is not None:
            problem = error.message
            raise ToolLoadError(
                BAD_VALUE.format(server=server, name=name, tool=tool.name, problem=problem)
            )
