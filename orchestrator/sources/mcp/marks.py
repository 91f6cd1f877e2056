"""What a folder's configuration makes of its MCP server's tools: names, scopes, sensitivity.

Light on purpose (no LangChain, no MCP SDK): `tools show` and the startup
check read it as well as the tools themselves (see `tool`).
"""

from __future__ import annotations

from orchestrator.folders.sensitivity import BY_SERVER, marked_actions
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.sources.mcp.definitions import ServerDefinition, ToolDefinition
from orchestrator.sources.mcp.tool_scope import JsonScope, json_scopes


def check_config(
    config: ToolConfig, definition: ServerDefinition
) -> tuple[dict[str, JsonScope], dict[str, str]]:
    """The scopes and sensitivity marks of the server's tools, by their names on the server.

    Raises ToolLoadError when `config` names a parameter or sensitive action no tool has.
    """
    scopes = json_scopes(config.name, definition.tools, config.parameters)
    tools = definition.tools
    destructive = {name: BY_SERVER for name, tool in tools.items() if hint(tool, "destructiveHint")}
    marks = marked_actions(config.name, config, known=tools.keys(), marks=destructive)
    return scopes, marks


def hint(tool: ToolDefinition, name: str) -> bool:
    """Whether the server sets the annotation `name` (`destructiveHint`, ...) to true."""
    return (tool.annotations or {}).get(name) is True
