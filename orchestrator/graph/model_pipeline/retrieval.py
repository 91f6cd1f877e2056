"""RAG on the model side: context from the user's other conversations, shown before the history."""

from __future__ import annotations

import logging
from typing import Protocol

from langchain_core.messages import SystemMessage

from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.notes import is_persons
from orchestrator.store.text import storable_text

logger = logging.getLogger(__name__)


class ContextLookup(Protocol):
    """Context for a query from the user's other conversations ('' when none).

    `store.rag.Retriever` is the one over the message store.
    """

    async def __call__(self, query: str, *, user_id: str, session_id: str) -> str: ...


class RetrievalMiddleware:
    """Looks the turn's context up once, at its first model call, and shows it to every call.

    The context follows the system message. It is kept in the state (`context`)
    for the turn's later calls once the model has seen it; missing context
    never costs the user an answer.
    """

    def __init__(self, retriever: ContextLookup) -> None:
        self.retriever = retriever

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """Add the context to `request`; keep it for the turn when the model was called."""
        first = request.iterations == 0
        found = await self._look_up(request) if first else request.state.get("context")
        if found:
            request = request.override(messages=[SystemMessage(found), *request.messages])
        answer = await handler(request)
        if first and answer.reply is not None:
            return answer.override(update={**answer.update, "context": found})
        return answer

    async def _look_up(self, request: ModelCall) -> str:
        """Context for the turn's message from the user's other sessions ('' when none).

        The session starts the lookup with the turn (`RunContext.lookup`), so
        that it runs beside the checkpoint work before the model node; without
        one it runs here.
        """
        run = request.run
        try:
            if run.lookup is not None:
                return await run.lookup
            messages = request.state["messages"]
            query = next((m.text for m in reversed(messages) if is_persons(m)), "")
            return await self.retriever(
                storable_text(query),  # PostgreSQL takes no NUL, not even in a query
                user_id=run.user_id,
                session_id=run.session_id or "",
            )
        except Exception as error:  # noqa: BLE001 - missing context never costs an answer
            logger.warning("RAG lookup failed: %s: %s", type(error).__name__, error)
            return ""
