"""PostgreSQL storage: sessions, messages with embeddings, requests, checkpoints.

Imported on first use, so that starting the embedded server (`store.embedded`, on a
thread of its own while a command starts) loads no SQLAlchemy, LangChain or LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.lazy import lazy_exports

if TYPE_CHECKING:
    from orchestrator.store.engine import Database, DatabaseUnavailableError
    from orchestrator.store.messages import FoundMessage, MessageStore
    from orchestrator.store.sessions import SessionOwnedError
    from orchestrator.store.storage import Storage

_LAZY = {
    "Database": "orchestrator.store.engine",
    "DatabaseUnavailableError": "orchestrator.store.engine",
    "FoundMessage": "orchestrator.store.messages",
    "MessageStore": "orchestrator.store.messages",
    "SessionOwnedError": "orchestrator.store.sessions",
    "Storage": "orchestrator.store.storage",
}

__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "Database",
    "DatabaseUnavailableError",
    "FoundMessage",
    "MessageStore",
    "SessionOwnedError",
    "Storage",
]
