"""Tools: what a tool author imports (the contract, results, context, HITL types), and the request-log port.

The dispatch pipeline (`orchestrator.dispatch`) and the built-ins (`orchestrator.sources`) live
higher up; their names are re-exported here, on first use, as they were before.

Imported on first use, so that listing or approving folders loads no LangChain.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.dispatch.dispatcher import Dispatcher
    from orchestrator.dispatch.middleware import CallRequest, ToolMiddleware
    from orchestrator.sources.builtin import builtin_tools
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
    "builtin_tools": "orchestrator.sources.builtin",
    "RunContext": "orchestrator.tools.context",
    "CallRequest": "orchestrator.dispatch.middleware",
    "ToolMiddleware": "orchestrator.dispatch.middleware",
    "Dispatcher": "orchestrator.dispatch.dispatcher",
    "Billing": "orchestrator.tools.results",
    "ToolResult": "orchestrator.tools.results",
    "ToolSettings": "orchestrator.tools.tool_settings",
}


_lazy = lazy_exports(__name__, _LAZY)
_RENAMED = {"ToolCallRequest": "CallRequest"}


def __getattr__(name: str) -> object:
    """The exports above on first use; a renamed one with a deprecation warning."""
    if name in _RENAMED:
        warnings.warn(
            f"orchestrator.tools.{name} is now {_RENAMED[name]}", DeprecationWarning, stacklevel=2
        )
        name = _RENAMED[name]
    return _lazy(name)

__all__ = [
    "ActionSpec",
    "AgentTool",
    "Billing",
    "Dispatcher",
    "InvalidToolArgumentsError",
    "NotAI",
    "Tool",
    "RunContext",
    "CallRequest",
    "ToolContext",
    "ToolError",
    "ToolRequest",
    "ToolMiddleware",
    "ToolResult",
    "ToolSettings",
    "action",
    "builtin_tools",
]
