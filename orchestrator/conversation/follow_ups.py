"""Follow-ups: how a background job ended, told to the model, and the turn in which it reports it.

Past `max_follow_ups` follow-ups since the user's last message, the result is
only added to the conversation (the model sees it next turn): a job whose
report starts another job cannot chain turns forever. While a question waits,
the result is kept and sent with the user's next message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime

from langchain_core.messages import HumanMessage

from orchestrator.conversation.archive import Archive
from orchestrator.conversation.job_board import BackgroundJob
from orchestrator.conversation.thread import Thread
from orchestrator.conversation.turns import EventHandler, TurnResult
from orchestrator.errors import QuestionsWaitingError
from orchestrator.graph.prompts import FOLLOW_UP_LIMIT
from orchestrator.notes import note

FOLLOW_UP = (
    "Background job {job_id} ({tool}) has {status} ({at}). Its result: {result}\n"
    "Tell the user what came of it."
)
BACKGROUND_NOTE = "background_task"  # the notes' kind, as older conversations carry it
FollowUpHandler = Callable[[BackgroundJob, "TurnResult | None"], None]
# The session's turn with a message (it holds the turn), and its hold on the turn alone.
TurnWith = Callable[[HumanMessage, EventHandler | None], Awaitable[TurnResult]]
Holding = Callable[[], AbstractAsyncContextManager[None]]


class FollowUps:
    """The follow-up turns of a session since its user's last message, and the notices kept."""

    def __init__(self, thread: Thread, archive: Archive, *, turn: TurnWith, holding: Holding) -> None:
        self._thread = thread
        self._archive = archive
        self._turn = turn
        self._holding = holding
        self._count = 0  # follow-up turns since the user's last message
        self._kept: list[HumanMessage] = []  # follow-up notices kept while a question waited

    def user_wrote(self) -> None:
        """The user's message: follow-ups may run turns again."""
        self._count = 0

    def take_kept(self) -> list[HumanMessage]:
        """The notices kept while a question waited, for the turn that starts now."""
        kept, self._kept = self._kept, []
        return kept

    async def follow_up(self, job: BackgroundJob, *, on_event: EventHandler | None) -> TurnResult | None:
        """Tell the model how `job` ended, and let it report to the user (see the module)."""
        settings = self._thread.settings
        body = (
            job.result.to_model_text(
                max_chars=settings.max_tool_result_chars, include_data=settings.include_tool_data
            )
            if job.result
            else "{}"
        )
        ended = job.finished_at or datetime.now(UTC)
        at = ended.astimezone(UTC).isoformat(timespec="seconds")
        notice = FOLLOW_UP.format(job_id=job.job_id, tool=job.tool, status=job.status, at=at, result=body)
        if self._count >= settings.max_follow_ups:
            await self._end_turn_with([note(f"{notice}\n{FOLLOW_UP_LIMIT}", kind=BACKGROUND_NOTE)])
            return None
        message = note(notice, kind=BACKGROUND_NOTE)
        self._count += 1
        try:
            return await self._turn(message, on_event)
        except QuestionsWaitingError:
            self._count -= 1  # no turn ran
            self._kept.append(message)
            return None

    async def _end_turn_with(self, messages: list[HumanMessage]) -> None:
        """Add `messages` to the conversation as the end of a turn, without running the model.

        While a question waits they are kept for the next turn instead: a new
        checkpoint would drop the paused calls.
        """
        async with self._holding():
            if (await self._thread.state()).interrupts:
                self._kept.extend(messages)
                return
            await self._thread.update({"messages": messages})
            await self._archive.update()
