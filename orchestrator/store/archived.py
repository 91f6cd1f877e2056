"""A session's archived messages read back as messages: what `/history` shows of the
messages a summary stands for, which the checkpoint no longer holds (see compaction)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from sqlalchemy import text

from orchestrator.notes import FROM_ORCHESTRATOR, NOTE_KEY
from orchestrator.store.engine import Database

# Row-level security shows the user's own rows only; the (user_id, session_id, id)
# index reads them in the order they were archived.
SESSION_MESSAGES = text(
    """
    SELECT message_id, role, content, tool_name, request_id FROM messages
    WHERE user_id = :user_id AND session_id = :session_id ORDER BY id
    """
)
ARCHIVED_NOTE = "archived"  # the kind of a note read back: the archive keeps no kind


async def archived_messages(
    database: Database, session_id: str, *, user_id: str
) -> list[BaseMessage]:
    """Every message archived for the session, oldest first, as near the original as stored.

    A model message's tool calls come back as its stored text (the calls written out),
    a tool result without the call id it answered.
    """
    async with database.user_transaction(user_id) as connection:
        rows = (
            await connection.execute(
                SESSION_MESSAGES, {"user_id": user_id, "session_id": session_id}
            )
        ).all()
    return [
        _message(row.message_id, row.role, row.content, row.tool_name, row.request_id)
        for row in rows
    ]


def _message(
    message_id: str, role: str, content: str, tool_name: str | None, request_id: str | None
) -> BaseMessage:
    if role == "assistant":
        return AIMessage(content, id=message_id)
    if role == "tool":
        return ToolMessage(content, id=message_id, name=tool_name, tool_call_id=request_id or "")
    if role == "system" or content.startswith(FROM_ORCHESTRATOR):
        return HumanMessage(content, id=message_id, additional_kwargs={NOTE_KEY: ARCHIVED_NOTE})
    return HumanMessage(content, id=message_id)
