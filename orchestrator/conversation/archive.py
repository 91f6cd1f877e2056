"""A session's archive: every message stored as the history grows, and what a summary stands for
forgotten by the checkpoint once it is archived.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.types import StateSnapshot

from orchestrator.conversation.thread import Thread
from orchestrator.conversation.turns import messages_of
from orchestrator.graph.model_pipeline.compaction import summarised
from orchestrator.graph.state import Summary
from orchestrator.notes import turn_start
from orchestrator.store.archived import archived_messages


class Archive:
    """The messages of a session this process archived, and the whole history they keep."""

    def __init__(self, thread: Thread) -> None:
        self._thread = thread
        self._archived: set[str] = set()  # ids of the messages this process archived

    async def update(self) -> StateSnapshot:
        """Store what the history gained since the last archive; the state it is part of."""
        state = await self._thread.state()
        await self.store(messages_of(state))
        return state

    async def store(self, history: list[BaseMessage]) -> None:
        """Archive what `history` gained since the last archive."""
        # By id, not by count: a resumed turn may add a tool message before older ones
        # (LangGraph keeps the calls' order, not the order they finished in).
        thread = self._thread
        if thread.storage is not None:
            new = [m for m in history if m.id not in self._archived]
            await thread.storage.messages.save(new, session_id=thread.session_id, user_id=thread.user_id)
            self._archived.update(m.id for m in new if m.id)

    async def history(self) -> list[BaseMessage]:
        """Every message of the conversation so far: those a summary stands for from the archive."""
        thread = self._thread
        held = messages_of(await thread.state())
        if thread.storage is None:
            return held
        ids = {m.id for m in held}
        archived = await archived_messages(
            thread.storage.database, thread.session_id, user_id=thread.user_id
        )
        return [*(m for m in archived if m.id not in ids), *held]

    async def keep_summary(self, summary: Summary) -> None:
        """Store a summary written outside a turn (the caller holds the turn), as a turn's is."""
        state = await self.update()
        update: dict[str, object] = {"summary": summary}
        update.update(self._forgetting(messages_of(state), summary))
        await self._thread.update(update)

    async def forget_summarised(self, messages: list[BaseMessage], summary: Summary | None) -> None:
        """Drop from the checkpoint the archived messages of earlier turns a summary stands for.

        LangGraph reads and writes a thread's whole `messages` channel every step:
        kept, a long conversation would cost each turn in proportion to its length.
        """
        forgetting = self._forgetting(messages, summary)
        if forgetting:
            await self._thread.update(forgetting)

    def _forgetting(self, messages: list[BaseMessage], summary: Summary | None) -> dict[str, object]:
        """The update that removes them (empty: none to remove, or no archive to keep them)."""
        if self._thread.storage is None:
            return {}
        start = turn_start(messages)
        gone: list[BaseMessage] = []
        for message in summarised(messages, summary):
            if message.id == start:  # the last turn stays whole, for its result and a resume
                break
            if message.id in self._archived:
                gone.append(RemoveMessage(id=message.id))
        return {"messages": gone} if gone else {}
