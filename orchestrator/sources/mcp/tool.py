"""An MCP server's tools as LangChain tools: `<folder>_<tool>`, with the server's schemas.

They carry the same metadata as a folder's actions (`tool`, `action`,
`folder`, timeout, retries, sensitivity), so the dispatch pipeline treats
them like any tool: AI scope, validation, approval, billing, timeouts and
the request log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import ArgsSchema
from pydantic import JsonValue, SkipValidation

from orchestrator.folders.risk_marks import action_risks
from orchestrator.folders.tool_config import POLICY_FIELDS, ToolConfig
from orchestrator.folders.tool_names import qualified_name
from orchestrator.sources.mcp.definitions import ServerDefinition, ToolDefinition
from orchestrator.sources.mcp.marks import check_config, hint
from orchestrator.sources.mcp.pool import McpServer
from orchestrator.sources.mcp.sandboxed import denial_note
from orchestrator.sources.mcp.tool_scope import JsonScope
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)

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
        """Run the tool on its server; the server's answer in the envelope.

        Under a sandbox, an answer that reads as a permission denial says so in its
        metadata (and so in the request log): the rule that refused it is not known.
        """
        from orchestrator.sources.mcp.content import tool_result  # the SDK, with the first call

        result = tool_result(await self.server.call(self.remote_name, arguments))
        note = denial_note(result.message) if self.server.sandbox is not None else None
        if note is not None:
            result.metadata["sandbox"] = note
        return result


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
    risks = action_risks(config.name, config, known=definition.tools.keys())
    tools: dict[str, BaseTool] = {}
    for tool in definition.tools.values():
        name = qualified_name(config.name, tool.name)
        if name in tools:
            logger.warning(DUPLICATE, config.name, name)
            continue
        tool_metadata = {
            **metadata, "action": tool.name, "sensitive": marks.get(tool.name), **risks[tool.name]
        }
        if hint(tool, "idempotentHint"):  # the server says so: safe to run again
            tool_metadata["idempotent"] = True
        tools[name] = _tool(server, tool, name, config, tool_metadata, scopes.get(tool.name))
    return list(tools.values())


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
