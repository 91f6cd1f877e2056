"""An agent's `state:` (its folder's `tool_config.yaml`): what conversation each call starts from.

- `local` (the default): a fresh conversation per call, the request alone.
- `parent`: the caller's recent conversation too (its text turns, within
  `caller_tokens` of the agent's window), then the request.
- `standalone`: the agent's own conversation with this user, kept from call to
  call (by user and agent path) in a `ConversationStore`: the orchestrator's
  database, under row-level security, or, without storage, this process's memory.

The host (`sources.agent_states`) resolves it for each agent folder; the agent
(`tools.agent`) reads it at each call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

StateMode = Literal["local", "parent", "standalone"]
STATE_MODES: tuple[StateMode, ...] = ("local", "parent", "standalone")
# Of the agent's window, the most the caller's conversation takes (`parent`): the rest is
# for its system prompt, its tools and its own rounds.
CALLER_SHARE = 0.25


@dataclass(frozen=True)
class SavedConversation:
    """A standalone agent's conversation with one user: the messages after its summary (the
    summary stands for the older ones, which are not kept), and the summary."""

    messages: tuple[BaseMessage, ...] = ()
    summary: Mapping[str, object] | None = None


class ConversationStore(Protocol):
    """Where standalone agents' conversations are kept, one per user and agent path."""

    async def load(self, user_id: str, agent_path: Sequence[str]) -> SavedConversation:
        """The user's conversation with the agent at `agent_path` (empty before the first call)."""
        ...

    async def save(
        self, user_id: str, agent_path: Sequence[str], conversation: SavedConversation
    ) -> None:
        """Keep `conversation` in place of the user's previous one with that agent."""
        ...


class MemoryConversations:
    """Standalone conversations kept in this process's memory (a run without storage): they
    continue from call to call until the process ends."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, tuple[str, ...]], SavedConversation] = {}

    async def load(self, user_id: str, agent_path: Sequence[str]) -> SavedConversation:
        """The conversation kept for the user and agent, else an empty one."""
        return self._kept.get((user_id, tuple(agent_path)), SavedConversation())

    async def save(
        self, user_id: str, agent_path: Sequence[str], conversation: SavedConversation
    ) -> None:
        """Keep `conversation` for the user and agent."""
        self._kept[(user_id, tuple(agent_path))] = conversation


@dataclass(frozen=True)
class AgentState:
    """One agent's `state:`; `caller_tokens` for `parent`, `store` for `standalone`."""

    mode: StateMode = "local"
    caller_tokens: int = 0
    store: ConversationStore | None = None
    # One call at a time per user continues a standalone conversation (in this process):
    # two at once would each start from the same one, and one's exchange would be lost.
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict[str, asyncio.Lock], compare=False)

    def lock(self, user_id: str) -> asyncio.Lock:
        """The lock a standalone call for `user_id` holds while it loads, runs and saves."""
        return self._locks.setdefault(user_id, asyncio.Lock())
