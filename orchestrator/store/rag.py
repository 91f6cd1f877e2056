"""RAG context: the user's best-matching messages from their other sessions, within a budget."""

from __future__ import annotations

from orchestrator.store.messages import FoundMessage, MessageStore

HEADER = (
    "Context retrieved from the user's earlier conversations (other sessions), best match "
    "first. It may or may not be relevant; prefer the current conversation when they differ."
)
LABELS = {"user": "user", "assistant": "you"}


class Retriever:
    """Finds context for a query: semantically when the embedder is ready, else by words."""

    def __init__(
        self, store: MessageStore, *, match_count: int, threshold: float, max_chars: int
    ) -> None:
        self.store = store
        self.match_count = match_count
        self.threshold = threshold
        self.max_chars = max_chars

    async def __call__(self, query: str, *, user_id: str, session_id: str) -> str:
        if not query.strip() or self.match_count == 0 or self.max_chars == 0:
            return ""
        embedder = self.store.embedder
        if embedder is not None and embedder.ready:
            found = await self.store.semantic_message_search(
                query, user_id, self.match_count, self.threshold, exclude_session_id=session_id
            )
        else:  # no embedder, or the local model still loading: never wait on it
            found = await self.store.search_any_words(
                query, user_id, limit=self.match_count, exclude_session_id=session_id
            )
        return format_context(found, max_chars=self.max_chars)


def format_context(found: list[FoundMessage], *, max_chars: int) -> str:
    """The header and one line per message, cut to `max_chars` in all."""
    lines = [HEADER]
    used = len(HEADER)
    for message in found:
        if message.role not in LABELS:
            continue
        line = (
            f"- [{message.created_at:%Y-%m-%d}, {LABELS[message.role]}] "
            f"{' '.join(message.content.split())}"
        )
        room = max_chars - used - 1
        if room <= 20:
            break
        lines.append(line if len(line) <= room else line[: room - 1] + "…")
        used += len(lines[-1]) + 1
    return "\n".join(lines) if len(lines) > 1 else ""
