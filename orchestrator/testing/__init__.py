"""Helpers for testing graphs, tools and sessions without a real model or network."""

from orchestrator.testing.fake_embedder import KeywordEmbeddings
from orchestrator.testing.folder_loading import load_tool_folder
from orchestrator.testing.network import RemoteConnectionBlocked, block_remote_connections
from orchestrator.testing.openai_server import (
    EmptyReply,
    Endless,
    ErrorReply,
    HangUp,
    OpenAICompatibleServer,
    RawReply,
    RawToolCall,
)
from orchestrator.testing.scripted import ScriptedChatModel, ScriptExhaustedError, call_tools

__all__ = [
    "ErrorReply",
    "EmptyReply",
    "Endless",
    "HangUp",
    "KeywordEmbeddings",
    "OpenAICompatibleServer",
    "RawReply",
    "RawToolCall",
    "RemoteConnectionBlocked",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "block_remote_connections",
    "call_tools",
    "load_tool_folder",
]
