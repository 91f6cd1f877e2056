"""Tools: what a tool author imports (the contract, results, context, HITL types), and the request-log port.

The dispatch pipeline (`orchestrator.dispatch`) and the built-ins (`orchestrator.sources`) live
higher up: import their names from there.

Imported on first use, so that listing or approving folders loads no LangChain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.tools.agent import AgentTool
    from orchestrator.tools.base import ActionSpec, Tool, ToolContext, ToolRequest, action
    from orchestrator.tools.context import RunContext
    from orchestrator.tools.not_ai import NotAI
    from orchestrator.tools.results import Billing, ToolResult
    from orchestrator.tools.tool_settings import ToolSettings

_LAZY = {
    "AgentTool": "orchestrator.tools.agent",
    "ActionSpec": "orchestrator.tools.base",
    "Tool": "orchestrator.tools.base",
    "NotAI": "orchestrator.tools.not_ai",
    "ToolContext": "orchestrator.tools.base",
    "ToolRequest": "orchestrator.tools.base",
    "action": "orchestrator.tools.base",
    "RunContext": "orchestrator.tools.context",
    "Billing": "orchestrator.tools.results",
    "ToolResult": "orchestrator.tools.results",
    "ToolSettings": "orchestrator.tools.tool_settings",
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "ActionSpec",
    "AgentTool",
    "Billing",
    "InvalidToolArgumentsError",
    "NotAI",
    "RunContext",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRequest",
    "ToolResult",
    "ToolSettings",
    "action",
]
