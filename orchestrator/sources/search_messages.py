"""The built-in `search_messages` tool: the model searches the user's earlier messages."""

from __future__ import annotations

from typing import Literal

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, JsonValue

from orchestrator.errors import ToolError
from orchestrator.store.messages import MEANING_THRESHOLD, FoundMessage, MessageStore
from orchestrator.tools.context import current_context
from orchestrator.tools.results import ToolResult

PREVIEW_CHARS = 300


class SearchMessagesArgs(BaseModel):
    query: str = Field(min_length=1, description="What to look for, in plain words.")
    mode: Literal["auto", "meaning", "words"] = Field(
        default="auto", description="By meaning (semantic), by words (full text), or auto."
    )
    limit: int = Field(default=5, ge=1, le=20)


def search_messages_tool(store: MessageStore) -> BaseTool:
    """A tool over `store`, limited to the user of the run that calls it."""

    async def search_messages(query: str, mode: str = "auto", limit: int = 5) -> ToolResult:
        context = current_context()
        user_id = context.user_id if context is not None else ""
        if not user_id:
            raise ToolError("search_messages needs a user; none is set for this run", recoverable=False)
        by_meaning = mode == "meaning" or (mode == "auto" and store.embedder is not None)
        if by_meaning:
            try:
                found = await store.semantic_message_search(
                    query, user_id, limit, match_threshold=MEANING_THRESHOLD
                )
            except LookupError as error:
                raise ToolError(f"{error}; search with mode 'words'", code="semantic_search_off") from None
        else:
            found = await store.search_messages(query, user_id, limit=limit)
        how = "meaning" if by_meaning else "words"
        return ToolResult(
            message=f"{len(found)} message(s) found by {how}.",
            data=[_describe(message) for message in found],
        )

    return StructuredTool.from_function(
        coroutine=search_messages,
        name="search_messages",
        description=(
            "Search the user's earlier messages, across all their conversations, by meaning "
            "or by words; use when they refer to something said before."
        ),
        args_schema=SearchMessagesArgs,
    )


def _describe(message: FoundMessage) -> dict[str, JsonValue]:
    content = " ".join(message.content.split())
    return {
        "session_id": message.session_id,
        "role": message.role,
        "when": message.created_at.isoformat(timespec="minutes"),
        "content": content if len(content) <= PREVIEW_CHARS else content[: PREVIEW_CHARS - 1] + "…",
        "score": round(message.score, 3),
    }
