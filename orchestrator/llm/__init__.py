"""Chat models: configured providers and the built-in offline model (imported on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.llm.model_errors import explain_model_error
    from orchestrator.llm.offline import OfflineChatModel
    from orchestrator.llm.providers import build_chat_model

__all__ = ["OfflineChatModel", "build_chat_model", "explain_model_error"]

__getattr__ = lazy_exports(
    __name__,
    {
        "OfflineChatModel": "orchestrator.llm.offline",
        "build_chat_model": "orchestrator.llm.providers",
        "explain_model_error": "orchestrator.llm.model_errors",
    },
)
