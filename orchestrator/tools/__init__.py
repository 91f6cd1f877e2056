"""Tools: the drop-in contract, the result envelope, the dispatch pipeline, the built-in tools.

Imported on first use, so that listing or approving folders loads no LangChain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.tools.agent import AgentTool
    from orchestrator.tools.base import ActionSpec, Tool, ToolContext, ToolRequest, action
    from orchestrator.tools.builtin import builtin_tools
    from orchestrator.tools.context import RunContext
    from orchestrator.tools.pipeline.base import ToolCallRequest, ToolMiddleware
    from orchestrator.tools.pipeline.dispatch import Dispatcher
    from orchestrator.tools.results import Billing, ToolResult
    from orchestrator.tools.scope import NotAI
    from orchestrator.tools.settings import ToolSettings

_LAZY = {
    "AgentTool": "orchestrator.tools.agent",
    "ActionSpec": "orchestrator.tools.base",
    "Tool": "orchestrator.tools.base",
    "NotAI": "orchestrator.tools.scope",
    "ToolContext": "orchestrator.tools.base",
    "ToolRequest": "orchestrator.tools.base",
    "action": "orchestrator.tools.base",
    "builtin_tools": "orchestrator.tools.builtin",
    "RunContext": "orchestrator.tools.context",
    "ToolCallRequest": "orchestrator.tools.pipeline.base",
    "ToolMiddleware": "orchestrator.tools.pipeline.base",
    "Dispatcher": "orchestrator.tools.pipeline.dispatch",
    "Billing": "orchestrator.tools.results",
    "ToolResult": "orchestrator.tools.results",
    "ToolSettings": "orchestrator.tools.settings",
}


__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "ActionSpec",
    "AgentTool",
    "Billing",
    "Dispatcher",
    "InvalidToolArgumentsError",
    "NotAI",
    "Tool",
    "RunContext",
    "ToolCallRequest",
    "ToolContext",
    "ToolError",
    "ToolRequest",
    "ToolMiddleware",
    "ToolResult",
    "ToolSettings",
    "action",
    "builtin_tools",
]
