"""Tools: the result envelope, the executor, and the built-in tools."""

from orchestrator.tools.builtin import builtin_tools
from orchestrator.tools.executor import ToolExecutor
from orchestrator.tools.results import Billing, ToolResult

__all__ = ["Billing", "ToolExecutor", "ToolResult", "builtin_tools"]
