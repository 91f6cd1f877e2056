"""The typed run context: who a graph run is for, and the services its tool calls report to.

It travels through LangGraph's `context_schema` / `Orchestrator`, not as string keys
in the run config. A nested agent's graph runs with a copy whose `request_id`
is the call that started it, so its own calls take that call as their parent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Generator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from orchestrator.errors import ToolError

if TYPE_CHECKING:
    from datetime import datetime

    from langchain_core.messages import BaseMessage
    from sqlalchemy.ext.asyncio import AsyncConnection

    from orchestrator.tools.authorizations import AuthorizationDesk
    from orchestrator.tools.request_log import BackgroundRunner, RequestObserver
    from orchestrator.usage.meter import UsageMeter


class UserTransactions(Protocol):
    """A database that opens transactions under one user's row-level security (`store.Database`)."""

    def user_transaction(self, user_id: str) -> AbstractAsyncContextManager[AsyncConnection]: ...


class TextEmbedder(Protocol):
    """An embedding model for a tool's own texts (the store's `Embedder` is one)."""

    @property
    def vectors_name(self) -> str:
        """The name stored beside each vector it makes (vectors of other models do not compare)."""
        ...

    async def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


NO_MESSAGES = (
    "searching the user's messages needs the orchestrator's database, which this run "
    "does not have (a folder in a process of its own, or a run without storage)"
)
MAX_FOUND = 50


class FoundText(Protocol):
    """A stored message a search found (the store's `FoundMessage`)."""

    @property
    def session_id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def score(self) -> float: ...


class MessageSearch(Protocol):
    """The store's search of one user's messages (`store.MessageStore`)."""

    async def search(self, query: str, user_id: str, *, limit: int = 5) -> Sequence[FoundText]: ...


@dataclass(frozen=True)
class UserDatabase:
    """A database as one user sees it: every transaction sees only that user's rows."""

    database: UserTransactions
    user_id: str

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A transaction that sees only this user's rows."""
        return self.database.user_transaction(self.user_id)


@dataclass(frozen=True)
class RunContext:
    """What every node and tool call of one graph run may need.

    `request_id` is the request this graph runs for: None for the orchestrator
    itself, the agent tool's call for a nested agent. `agent_path` names the
    agents this graph runs under, from the top: empty for the orchestrator,
    `("personal_assistant_agent",)` for the agent it calls, and so on down.
    `lookup` is the RAG context of the turn's message, which the session
    starts looking up when the turn begins. `job` is the request a worker runs
    as a job (see `orchestrator.jobs`): that call runs here, where it was
    handed to, and is never handed over again. `messages` searches the user's
    earlier messages (`search_messages`). `authorizations` is where an
    operator level's tools find the user's pending authorization requests
    (None: without storage). `conversation` is, in the call of an agent with
    `state: parent`, the caller's recent text turns (see `tools.agent_state`);
    empty elsewhere.
    """

    user_id: str
    session_id: str | None = None
    request_id: str | None = None
    observer: RequestObserver | None = None
    background: BackgroundRunner | None = None
    usage: UsageMeter | None = None
    database: UserDatabase | None = None
    agent_path: tuple[str, ...] = ()
    lookup: asyncio.Future[str] | None = None  # the turn's RAG context, looked up as it began
    job: str | None = None
    authorizations: AuthorizationDesk | None = None
    messages: MessageSearch | None = None
    conversation: tuple[BaseMessage, ...] = ()

    async def search_messages(self, query: str, k: int = 5) -> list[FoundText]:
        """The user's `k` earlier messages (of any session) best matching `query`, best first.

        By meaning when an embedding model is configured, else by words; only this
        run's user's messages, which row-level security holds to. ToolError when the
        run has no database (a folder with `isolation: process`, a run without storage).
        """
        if self.messages is None:
            raise ToolError(NO_MESSAGES, recoverable=False)
        found = await self.messages.search(query, self.user_id, limit=min(max(k, 1), MAX_FOUND))
        return list(found)

    def below(self, request_id: str) -> RunContext:
        """The context of a nested agent run for the call `request_id`."""
        return replace(self, request_id=request_id)

    def inside(self, agent: str) -> RunContext:
        """The context of the graph of `agent`, one level further down."""
        return replace(self, agent_path=(*self.agent_path, agent))


_CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "orchestrator_run_context", default=None
)


def current_context() -> RunContext | None:
    """The context of the tool call running now (None outside one); its `request_id` is the call's."""
    return _CURRENT.get()


@contextmanager
def running_in(context: RunContext) -> Generator[None]:
    """Make `context` the current one for the code of one tool call."""
    token = _CURRENT.set(context)
    try:
        yield
    finally:
        _CURRENT.reset(token)
