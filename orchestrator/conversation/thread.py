"""What every part of a session reads and writes: the graph's thread of the conversation.

The session (`session.Session`) is a front over parts that share this: its
archive, the turns it runs, its follow-ups and the questions a turn waits on.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from orchestrator.conversation.job_board import JobBoard
from orchestrator.graph.builder import MODEL_NODE
from orchestrator.graph.state import OrchestratorState
from orchestrator.settings import Settings
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.store.storage import Storage
from orchestrator.tools.authorizations import AuthorizationDesk
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.usage.meter import UsageMeter

# The agent graph a conversation runs (`graph.builder.build_agent_graph`).
ConversationGraph = CompiledStateGraph[OrchestratorState, RunContext]


@dataclass(frozen=True)
class Thread:
    """One user's conversation, as the graph's checkpointer keeps it under `session_id`."""

    graph: ConversationGraph
    settings: Settings
    user_id: str
    session_id: str
    storage: Storage | None
    jobs: JobBoard | None
    usage: UsageMeter
    authorizations: AuthorizationDesk | None = None  # an operator level's (see `authorization_desk`)

    @property
    def config(self) -> RunnableConfig:
        """The run config: which thread of the checkpointer holds this conversation.

        Its metadata names the session and its user on every LangChain run (LangSmith).
        """
        return {
            "configurable": {"thread_id": self.session_id},
            "metadata": {"session_id": self.session_id, "user_id": self.user_id},
        }

    @property
    def context(self) -> RunContext:
        """The typed context of this session's graph runs."""
        return RunContext(
            user_id=self.user_id,
            session_id=self.session_id,
            observer=self.storage.requests if self.storage is not None else None,
            background=self.jobs,
            usage=self.usage,
            database=(
                UserDatabase(self.storage.database, self.user_id) if self.storage is not None else None
            ),
            messages=self.storage.messages if self.storage is not None else None,
            authorizations=self.authorizations,
        )

    @property
    def pooled(self) -> PooledPostgresSaver | None:
        """The graph's checkpointer when it is ours (peeks, riders); None for any other."""
        checkpointer = self.graph.checkpointer
        return checkpointer if isinstance(checkpointer, PooledPostgresSaver) else None

    async def state(self) -> StateSnapshot:
        """The conversation's state as its last checkpoint has it."""
        return await self.graph.aget_state(self.config)

    async def update(self, values: dict[str, object]) -> None:
        """Write `values` into the conversation as the model node would (a turn's end)."""
        await self.graph.aupdate_state(self.config, values, as_node=MODEL_NODE)
