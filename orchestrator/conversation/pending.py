"""The questions a session's paused turn waits on, and the person's answers to them."""

from __future__ import annotations

from collections.abc import Mapping

from langgraph.types import StateSnapshot

from orchestrator.conversation.thread import Thread
from orchestrator.conversation.turns import AnsweredQuestion, PendingQuestion, questions_of
from orchestrator.errors import UserError
from orchestrator.tools.hitl import Decision


class PendingQuestions:
    """What a session's turn waits on; the current turn's questions answered in this process."""

    def __init__(self, thread: Thread) -> None:
        self._thread = thread
        self.answered: list[AnsweredQuestion] = []

    async def pending(self) -> list[PendingQuestion]:
        """The questions the session's turn waits on, in the order of its calls (empty: none)."""
        return questions_of(await self._thread.state())

    async def waiting(self) -> list[PendingQuestion]:
        """`pending`, from the checkpoint the run that follows reads too when none wait."""
        pooled = self._thread.pooled
        if pooled is not None and not await pooled.may_wait(self._thread.session_id):
            return []
        return await self.pending()

    def forget_peek(self) -> None:
        """Drop the checkpoint `waiting` read, if the run that follows did not read it."""
        if (pooled := self._thread.pooled) is not None:
            pooled.forget(self._thread.session_id)

    def new_turn(self) -> None:
        """A turn starts: none of its questions has been answered yet."""
        self.answered = []

    def accept(self, state: StateSnapshot, decisions: Mapping[str, Decision]) -> None:
        """Take the person's `decisions` on the questions `state` waits on, keyed by question id.

        Raises `UserError` for an id no open question has (answered already?).
        """
        asked = {q.id: q for q in questions_of(state)}
        unknown = [question_id for question_id in decisions if question_id not in asked]
        if unknown:
            raise UserError(
                f"No open question {unknown[0]} in session {self._thread.session_id}: answered already?"
            )
        self.answered += [AnsweredQuestion(asked[i], d) for i, d in decisions.items()]
