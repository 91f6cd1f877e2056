"""A runtime's tools as MCP serves them: listed with their schemas, each call through the pipeline.

Served by the `mcp` SDK's low-level `Server` (see `server_thread`). A call is a tool call as a
model's would be: it gets a request id, lands in the request log under the
served user, and passes the same middleware (scope, validation, approval,
timeouts). No one is there to ask: the pipeline given decides without asking
(see `pipeline.approval.UnattendedGate`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from mcp import types

from orchestrator.dispatch.ask_approval import UnattendedGate, edit_schema
from orchestrator.dispatch.dispatcher import Dispatcher, default_middleware
from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.folders.sensitivity import SensitivityRules
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.serve.listing import listed_tool
from orchestrator.settings import Settings
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.results import ToolResult
from orchestrator.usage.meter import UsageMeter

SESSION_PREFIX = "mcp-"  # the request log's session of one served process: mcp-<hex>
SERVED_CUT = (
    "\n[cut: the result is {length} characters; above are the first {limit}. The whole "
    "result is this answer's structured content]"
)


def unattended_middleware(
    settings: Settings, *, allow_sensitive: bool, advice: str = ""
) -> list[ToolMiddleware]:
    """The dispatch pipeline with no one to ask: calls that need a decision run only if allowed."""
    rules = SensitivityRules.of(settings.sensitive_words)
    gate = UnattendedGate(rules, allow_sensitive=allow_sensitive, advice=advice)
    return default_middleware(settings, gates=[gate])


@dataclass(frozen=True)
class ServedTools:
    """The tools one process serves, the pipeline their calls run through, and for whom."""

    dispatcher: Dispatcher
    context: RunContext
    rules: SensitivityRules
    settings: Settings

    @classmethod
    def of(cls, runtime: Orchestrator, tools: Sequence[BaseTool], *, user: str) -> ServedTools:
        """`tools` served for `user`, through `runtime`'s pipeline, logged in its storage."""
        storage = runtime.storage
        context = RunContext(
            user_id=user,
            session_id=f"{SESSION_PREFIX}{uuid.uuid4().hex}",
            observer=storage.requests if storage is not None else None,
            database=UserDatabase(storage.database, user) if storage is not None else None,
            messages=storage.messages if storage is not None else None,
        )
        limits = Limits.from_settings(runtime.settings)
        dispatcher = Dispatcher(tools, limits=limits, middleware=runtime.middleware)
        rules = SensitivityRules.of(runtime.settings.sensitive_words)
        return cls(dispatcher, context, rules, runtime.settings)

    def listing(self) -> list[types.Tool]:
        """Every served tool as MCP describes one."""
        return [mcp_tool(tool, rules=self.rules) for tool in self.dispatcher.tools.values()]

    async def call(self, name: str, arguments: Mapping[str, object]) -> types.CallToolResult:
        """Run one call through the pipeline; its result as MCP answers a call."""
        # A fresh id per call: the request id follows from it, and a known one is a replay.
        call = ToolCall(name=name, args=dict(arguments), id=f"{SESSION_PREFIX}{uuid.uuid4().hex}")
        # Each call is a turn of its own: an agent's model calls are counted, logged and
        # held to the turn's budget.
        context = replace(self.context, usage=UsageMeter(prices=self.settings.price_table, budgets=self.settings.budgets))
        result = await self.dispatcher.dispatch(self.dispatcher.request(call, context))
        return call_result(result, max_chars=self.dispatcher.limits.max_result_chars)


def mcp_tool(tool: BaseTool, *, rules: SensitivityRules) -> types.Tool:
    """`tool` as an MCP tool: its name, description, the schema of what a caller sets, hints."""
    return listed_tool(tool.name, tool.description, edit_schema(tool), tool.metadata, rules=rules)


def call_result(result: ToolResult, *, max_chars: int) -> types.CallToolResult:
    """The envelope's model text as the content, the whole envelope as structured content.

    A text too long is cut, saying where the whole is: the client has no `read_result`
    (the handle is for the orchestrator's own models), but it has the structured content.
    """
    text = result.model_text()
    if len(text) > max_chars:
        text = text[:max_chars] + SERVED_CUT.format(length=len(text), limit=max_chars)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=result.model_dump(mode="json"),
        isError=result.status == "failure",
    )
