"""PostgreSQL storage: sessions, messages with embeddings, requests, checkpoints."""

from orchestrator.store.engine import Database, DatabaseUnavailableError
from orchestrator.store.messages import FoundMessage, MessageStore
from orchestrator.store.sessions import SessionOwnedError
from orchestrator.store.storage import Storage

__all__ = [
    "Database",
    "DatabaseUnavailableError",
    "FoundMessage",
    "MessageStore",
    "SessionOwnedError",
    "Storage",
]
