"""Tools: the drop-in contract, the result envelope, the executor, and the built-in tools."""

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.base import ActionSpec, Tool, ToolContext, ToolRequest, action
from orchestrator.tools.builtin import builtin_tools
from orchestrator.tools.executor import ToolExecutor
from orchestrator.tools.results import Billing, ToolResult

__all__ = [
    "ActionSpec",
    "AgentTool",
    "Billing",
    "InvalidToolArgumentsError",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolExecutor",
    "ToolRequest",
    "ToolResult",
    "action",
    "builtin_tools",
]
