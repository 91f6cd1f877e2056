"""A hierarchical agent orchestrator on LangGraph.

The names below are imported on first use, so that the command line starts
without loading LangChain and LangGraph until a command needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.lazy import lazy_exports
from orchestrator.version import __version__

if TYPE_CHECKING:
    from orchestrator.actions.node import as_node
    from orchestrator.conversation.session import Session
    from orchestrator.conversation.turns import ToolCallRecord, TurnResult
    from orchestrator.errors import (
        AuthenticationError,
        BudgetExceededError,
        ComponentMigrationError,
        ConfigError,
        DatabasePrivilegeError,
        DatabaseUnavailableError,
        DeveloperError,
        EmbeddingModelError,
        FileTooLargeError,
        FolderRefusedError,
        FolderUnavailableError,
        GiveBack,
        IncompleteReplyError,
        InvalidToolArgumentsError,
        McpServerError,
        MissingPackageError,
        ModelTimeoutError,
        ModelUnavailableError,
        OrchestratorError,
        QuestionsWaitingError,
        RateLimitedError,
        RefusedFileError,
        RemoteConfigError,
        RemoteConnectionBlocked,
        RequestRefusedError,
        SandboxUnavailableError,
        ScriptExhaustedError,
        ServerUserError,
        SessionOwnedError,
        ToolConfigError,
        ToolContractError,
        ToolError,
        ToolFolderError,
        ToolLoadError,
        TransientToolError,
        UnknownModelError,
        UnknownToolError,
        UnresolvedReferenceError,
        UserError,
        YamlTooLargeError,
    )
    from orchestrator.graph import OrchestratorState, build_agent_graph
    from orchestrator.runtime import Orchestrator
    from orchestrator.settings import Settings, load_settings
    from orchestrator.tools.envelope import Envelope
    from orchestrator.tools.results import Billing, ToolResult


# The errors too: `orchestrator.errors` loads pydantic and yaml, which the warm
# process's client (`orchestrator.warm.client`, loaded first by every command) must not.
_LAZY = {
    "BudgetExceededError": "orchestrator.errors",
    "ComponentMigrationError": "orchestrator.errors",
    "ConfigError": "orchestrator.errors",
    "DatabasePrivilegeError": "orchestrator.errors",
    "AuthenticationError": "orchestrator.errors",
    "GiveBack": "orchestrator.errors",
    "RateLimitedError": "orchestrator.errors",
    "RequestRefusedError": "orchestrator.errors",
    "DatabaseUnavailableError": "orchestrator.errors",
    "DeveloperError": "orchestrator.errors",
    "EmbeddingModelError": "orchestrator.errors",
    "FileTooLargeError": "orchestrator.errors",
    "FolderRefusedError": "orchestrator.errors",
    "FolderUnavailableError": "orchestrator.errors",
    "IncompleteReplyError": "orchestrator.errors",
    "InvalidToolArgumentsError": "orchestrator.errors",
    "McpServerError": "orchestrator.errors",
    "MissingPackageError": "orchestrator.errors",
    "ModelTimeoutError": "orchestrator.errors",
    "ModelUnavailableError": "orchestrator.errors",
    "OrchestratorError": "orchestrator.errors",
    "QuestionsWaitingError": "orchestrator.errors",
    "RefusedFileError": "orchestrator.errors",
    "RemoteConfigError": "orchestrator.errors",
    "RemoteConnectionBlocked": "orchestrator.errors",
    "SandboxUnavailableError": "orchestrator.errors",
    "ScriptExhaustedError": "orchestrator.errors",
    "SessionOwnedError": "orchestrator.errors",
    "ServerUserError": "orchestrator.errors",
    "ToolConfigError": "orchestrator.errors",
    "ToolContractError": "orchestrator.errors",
    "ToolError": "orchestrator.errors",
    "ToolFolderError": "orchestrator.errors",
    "ToolLoadError": "orchestrator.errors",
    "TransientToolError": "orchestrator.errors",
    "UnknownModelError": "orchestrator.errors",
    "UnknownToolError": "orchestrator.errors",
    "UnresolvedReferenceError": "orchestrator.errors",
    "UserError": "orchestrator.errors",
    "YamlTooLargeError": "orchestrator.errors",
    "OrchestratorState": "orchestrator.graph",
    "build_agent_graph": "orchestrator.graph",
    "Orchestrator": "orchestrator.runtime",
    "Session": "orchestrator.conversation.session",
    "ToolCallRecord": "orchestrator.conversation.turns",
    "TurnResult": "orchestrator.conversation.turns",
    "Settings": "orchestrator.settings",
    "load_settings": "orchestrator.settings",
    "Billing": "orchestrator.tools.results",
    "ToolResult": "orchestrator.tools.results",
    "Envelope": "orchestrator.tools.envelope",
    "as_node": "orchestrator.actions.node",
}


__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "__version__",
    "OrchestratorState",
    "Envelope",
    "as_node",
    "Billing",
    "BudgetExceededError",
    "ConfigError",
    "DatabasePrivilegeError",
    "AuthenticationError",
    "GiveBack",
    "RateLimitedError",
    "RequestRefusedError",
    "DatabaseUnavailableError",
    "DeveloperError",
    "EmbeddingModelError",
    "UnknownModelError",
    "FileTooLargeError",
    "FolderRefusedError",
    "FolderUnavailableError",
    "IncompleteReplyError",
    "InvalidToolArgumentsError",
    "McpServerError",
    "SandboxUnavailableError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "QuestionsWaitingError",
    "OrchestratorError",
    "RefusedFileError",
    "RemoteConfigError",
    "RemoteConnectionBlocked",
    "Orchestrator",
    "ScriptExhaustedError",
    "Session",
    "SessionOwnedError",
    "ServerUserError",
    "Settings",
    "ToolCallRecord",
    "ToolConfigError",
    "ToolContractError",
    "ToolError",
    "ToolFolderError",
    "ToolLoadError",
    "ComponentMigrationError",
    "MissingPackageError",
    "ToolResult",
    "TransientToolError",
    "TurnResult",
    "UnknownToolError",
    "UnresolvedReferenceError",
    "UserError",
    "YamlTooLargeError",
    "build_agent_graph",
    "load_settings",
]
