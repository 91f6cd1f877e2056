"""Standalone agents' conversations (`state: standalone`): one per user and agent path.

Each statement runs in a transaction of the user's (row-level security): a user
reads and writes only their own. What is kept is what the agent keeps of a call
(see `tools.agent.AgentTool.ask`): the messages after its summary, and the
summary, so a conversation is as large as the agent's window, not as its history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from langchain_core.messages import messages_from_dict, messages_to_dict
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as upsert

from orchestrator.store.models import agent_conversations
from orchestrator.store.text import storable_json
from orchestrator.tools.agent_state import SavedConversation
from orchestrator.tools.context import UserTransactions

_C = agent_conversations.c


def path_key(agent_path: Sequence[str]) -> str:
    """The agent path as stored: the names from the top, `/` between (names have none)."""
    return "/".join(agent_path)


class AgentConversations:
    """The standalone conversations kept in `database` (the agent's level's)."""

    def __init__(self, database: UserTransactions) -> None:
        self.database = database

    async def load(self, user_id: str, agent_path: Sequence[str]) -> SavedConversation:
        """The user's conversation with the agent at `agent_path`; empty before its first call."""
        async with self.database.user_transaction(user_id) as connection:
            row = (
                await connection.execute(
                    select(_C.messages, _C.summary).where(
                        _C.user_id == user_id, _C.agent_path == path_key(agent_path)
                    )
                )
            ).one_or_none()
        if row is None:
            return SavedConversation()
        messages = messages_from_dict(cast(list[dict[str, object]], row.messages))
        summary = cast(dict[str, object] | None, row.summary)
        return SavedConversation(tuple(messages), summary)

    async def save(
        self, user_id: str, agent_path: Sequence[str], conversation: SavedConversation
    ) -> None:
        """Keep `conversation` in place of the user's previous one with that agent."""
        values = {
            "messages": storable_json(messages_to_dict(list(conversation.messages))),
            "summary": storable_json(dict(conversation.summary)) if conversation.summary else None,
            "updated_at": func.now(),
        }
        statement = upsert(agent_conversations).values(
            user_id=user_id, agent_path=path_key(agent_path), **values
        )
        async with self.database.user_transaction(user_id) as connection:
            await connection.execute(
                statement.on_conflict_do_update(index_elements=[_C.user_id, _C.agent_path], set_=values)
            )
