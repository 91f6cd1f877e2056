"""An MCP server's tools as LangChain tools: `<folder>_<tool>`, with the server's schemas.

They carry the same metadata as a folder's actions (`tool`, `action`,
`folder`, timeout, retries, sensitivity), so the dispatch pipeline treats
them like any tool: AI scope, validation, approval, billing, timeouts and
the request log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import ArgsSchema
from pydantic import JsonValue, SkipValidation

from orchestrator.tools.adapter import POLICY_FIELDS
from orchestrator.tools.config import ToolConfig
from orchestrator.tools.mcp.content import tool_result
from orchestrator.tools.mcp.definitions import ServerDefinition, ToolDefinition
from orchestrator.tools.mcp.scope import JsonScope, json_scopes
from orchestrator.tools.mcp.server import McpServer
from orchestrator.tools.results import ToolResult
from orchestrator.tools.sensitivity import BY_SERVER, marked_actions

logger = logging.getLogger(__name__)

MAX_NAME = 64  # what OpenAI-style APIs accept for a function's name
NOT_A_NAME_CHARACTER = re.compile(r"[^A-Za-z0-9_-]")
DUPLICATE = "MCP server %s: two tools are both called %s here; only the first is offered"


class McpTool(StructuredTool):
    """One tool of an MCP server; a call goes through the server's kept session.

    The pipeline calls `call_tool` itself (see `pipeline.run.CallsItself`);
    LangChain's `ainvoke` works too, outside it.
    """

    server: SkipValidation[McpServer]
    remote_name: str
    full_schema: dict[str, JsonValue]  # hidden parameters included: calls are validated against it
    scope: SkipValidation[JsonScope | None] = None

    @property
    def tool_call_schema(self) -> ArgsSchema:
        return self.scope.visible if self.scope is not None else self.full_schema

    async def call_tool(self, arguments: dict[str, object]) -> ToolResult:
        """Run the tool on its server; the server's answer in the envelope."""
        return tool_result(await self.server.call(self.remote_name, arguments))


def mcp_tools(
    server: McpServer, definition: ServerDefinition, *, config: ToolConfig, folder: Path
) -> list[BaseTool]:
    """The LangChain tools of `server`, as `definition` (the approved one) describes them.

    Raises ToolLoadError when `config` names a parameter or sensitive action no tool has.
    """
    scopes, marks = check_config(config, definition)
    metadata = {
        "tool": config.name,
        "version": config.version,
        "folder": str(folder.resolve()),
        **config.model_dump(include=POLICY_FIELDS),
    }
    tools: dict[str, BaseTool] = {}
    for tool in definition.tools.values():
        name = function_name(config.name, tool.name)
        if name in tools:
            logger.warning(DUPLICATE, config.name, name)
            continue
        tool_metadata = {**metadata, "action": tool.name, "sensitive": marks.get(tool.name)}
        if _hint(tool, "idempotentHint"):  # the server says so: safe to run again
            tool_metadata["idempotent"] = True
        tools[name] = _tool(server, tool, name, config, tool_metadata, scopes.get(tool.name))
    return list(tools.values())


def check_config(
    config: ToolConfig, definition: ServerDefinition
) -> tuple[dict[str, JsonScope], dict[str, str]]:
    """The scopes and sensitivity marks of the server's tools, by their names on the server.

    Raises ToolLoadError when `config` names a parameter or sensitive action no tool has.
    """
    scopes = json_scopes(config.name, definition.tools, config.parameters)
    destructive = {name: BY_SERVER for name, tool in definition.tools.items() if _destructive(tool)}
    marks = marked_actions(config.name, config, known=definition.tools.keys(), marks=destructive)
    return scopes, marks


def function_name(folder: str, tool: str) -> str:
    """`<folder>_<tool>`, in the characters and length a model's function names allow."""
    return NOT_A_NAME_CHARACTER.sub("_", f"{folder}_{tool}")[:MAX_NAME]


def _tool(
    server: McpServer,
    tool: ToolDefinition,
    name: str,
    config: ToolConfig,
    metadata: Mapping[str, object],
    scope: JsonScope | None,
) -> McpTool:
    mcp_tool: McpTool

    async def run(**arguments: object) -> ToolResult:
        return await mcp_tool.call_tool(arguments)

    description = tool.description or tool.title or tool.name
    mcp_tool = McpTool(
        name=name,
        description=f"{description}\n(Part of {config.name}: {config.description})",
        args_schema=scope.visible if scope is not None else tool.inputSchema,
        coroutine=run,
        server=server,
        remote_name=tool.name,
        full_schema=tool.inputSchema,
        scope=scope,
        metadata=dict(metadata),
    )
    return mcp_tool


def _destructive(tool: ToolDefinition) -> bool:
    return _hint(tool, "destructiveHint")


def _hint(tool: ToolDefinition, name: str) -> bool:
    return bool((tool.annotations or {}).get(name) is True)
