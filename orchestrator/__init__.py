"""A hierarchical agent orchestrator on LangGraph."""

from orchestrator.errors import (
    ConfigError,
    InvalidToolArgumentsError,
    ModelUnavailableError,
    OrchestratorError,
    ToolError,
    UnknownToolError,
    UserError,
)
from orchestrator.graph import AgentState, build_agent_graph
from orchestrator.runtime import Runtime
from orchestrator.session import Session, ToolCallRecord, TurnResult
from orchestrator.settings import Settings, load_settings
from orchestrator.tools.results import Billing, ToolResult

__version__ = "0.1.0"

__all__ = [
    "AgentState",
    "Billing",
    "ConfigError",
    "InvalidToolArgumentsError",
    "ModelUnavailableError",
    "OrchestratorError",
    "Runtime",
    "Session",
    "Settings",
    "ToolCallRecord",
    "ToolError",
    "ToolResult",
    "TurnResult",
    "UnknownToolError",
    "UserError",
    "build_agent_graph",
    "load_settings",
]
