"""The memory lookup a user's message starts, beside the work before the model reads it."""

from __future__ import annotations

import asyncio

from langchain_core.messages import BaseMessage

from orchestrator.conversation.thread import Thread
from orchestrator.notes import is_persons
from orchestrator.store.text import storable_text


def look_up(thread: Thread, message: BaseMessage) -> asyncio.Task[str] | None:
    """Start looking up RAG context for `message` (None: no storage, or not the person's words)."""
    if thread.storage is None or not is_persons(message):
        return None
    query = storable_text(message.text)  # PostgreSQL takes no NUL, not even in a query
    retrieve = thread.storage.retriever(query, user_id=thread.user_id, session_id=thread.session_id)
    return asyncio.ensure_future(retrieve)


def let_go(lookup: asyncio.Future[str] | None) -> None:
    """A turn's lookup the model node may not have waited for: stopped, its failure seen."""
    if lookup is None:
        return
    if lookup.done() and not lookup.cancelled():
        lookup.exception()  # retrieved: a failed lookup is no unhandled error
    lookup.cancel()
