"""Chat models: configured providers and the built-in offline model."""

from orchestrator.llm.offline import OfflineChatModel
from orchestrator.llm.providers import build_chat_model, explain_model_error

__all__ = ["OfflineChatModel", "build_chat_model", "explain_model_error"]
