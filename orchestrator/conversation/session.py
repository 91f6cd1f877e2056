"""One conversation: runs the agent graph turn by turn and streams what happens.

`Session` is a front over its parts, which share the graph's thread of the
conversation (`thread`): running a turn and reading its stream (`turn_run`),
the archive and what a summary stands for (`archive`), follow-ups of background
jobs (`follow_ups`) and the questions a turn waits on (`pending`). What a turn
led to (`TurnResult` and its parts) is in `orchestrator.conversation.turns`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Unpack

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from orchestrator.conversation.archive import Archive
from orchestrator.conversation.follow_ups import FollowUpHandler, FollowUps
from orchestrator.conversation.job_board import BackgroundJob, JobBoard
from orchestrator.conversation.lookup import let_go, look_up
from orchestrator.conversation.pending import PendingQuestions
from orchestrator.conversation.thread import ConversationGraph, Thread
from orchestrator.conversation.turn_run import Outcome, TurnRunner, TurnWindow
from orchestrator.conversation.turns import (
    EventHandler,
    PartHandler,
    PendingQuestion,
    TokenEvent,
    ToolCallRecord,
    TurnEvent,
    TurnResult,
    Watchers,
    messages_of,
)
from orchestrator.errors import QuestionsWaitingError
from orchestrator.graph.state import OrchestratorState, Summary
from orchestrator.notes import turn_start
from orchestrator.plans import PlanView, plan_view
from orchestrator.settings import Settings
from orchestrator.store.sessions import claim_session
from orchestrator.store.storage import Storage
from orchestrator.store.usage_log import session_totals
from orchestrator.tools.authorizations import AuthorizationDesk
from orchestrator.tools.context import RunContext
from orchestrator.tools.hitl import Decision
from orchestrator.usage.meter import UsageMeter


class Session:
    """A conversation of one user, remembered by the graph's checkpointer under `session_id`.

    With storage, the session is claimed for its user, every message is
    archived (searchable, embedded later), tool calls are tracked, and a turn
    a killed process left unfinished can be resumed. `authorizations` is where
    an operator level's tools find the user's pending authorization requests.
    """

    def __init__(
        self,
        *,
        graph: ConversationGraph,
        settings: Settings,
        user_id: str,
        session_id: str | None = None,
        storage: Storage | None = None,
        jobs: JobBoard | None = None,
        authorizations: AuthorizationDesk | None = None,
    ) -> None:
        usage = UsageMeter(prices=settings.price_table, budgets=settings.budgets)
        session_id = session_id or uuid.uuid4().hex[:12]
        self._thread = thread = Thread(
            graph, settings, user_id, session_id, storage, jobs, usage, authorizations
        )
        # What the parts share (`thread`), read here too: none of it changes.
        self.graph, self.settings, self.storage, self.jobs = graph, settings, storage, jobs
        self.user_id, self.session_id, self.usage = user_id, session_id, usage
        self._archive = Archive(thread)
        self._run = TurnRunner(thread, self._archive)
        self._questions = PendingQuestions(thread)
        self._follow_ups = FollowUps(thread, self._archive, turn=self._turn_with, holding=self._holding)
        # Called with each background job's follow-up turn once it has run, or with
        # None when the follow-up limit kept the result for the next turn instead.
        self.on_follow_up: FollowUpHandler | None = None
        # Called once when another process runs a turn of this session and this one waits.
        self.on_busy: Callable[[], None] | None = None
        self._claimed = False
        self._turn = asyncio.Lock()  # one turn at a time: the user's, a resumed one, a follow-up
        if jobs is not None:
            jobs.deliver_to(session_id, self.deliver, user_id=user_id)

    @property
    def config(self) -> RunnableConfig:
        """The run config: the checkpointer's thread; the session and user on every run."""
        return self._thread.config

    @property
    def context(self) -> RunContext:
        """The typed context of its graph runs."""
        return self._thread.context

    @property
    def last_turn(self) -> TurnWindow | None:
        """The last turn this object ran (`/trace`)."""
        return self._run.last_turn

    async def run(self, text: str, **watchers: Unpack[Watchers]) -> TurnResult:
        """Send one user message and run the graph until the model answers or a question waits.

        While the session's turn waits for answers (see `pending`), a new message
        would drop the paused calls: it raises `QuestionsWaitingError` instead.
        """
        self._follow_ups.user_wrote()
        message = HumanMessage(content=text, id=uuid.uuid4().hex)
        return await self._turn_with(message, watchers.get("on_event"), on_part=watchers.get("on_part"))

    async def follow_up(
        self, job: BackgroundJob, *, on_event: EventHandler | None = None
    ) -> TurnResult | None:
        """Tell the model how a background job ended, and let it report to the user.

        None when no turn ran: past `max_follow_ups` follow-ups since the user's
        last message the result is only added to the conversation; while a
        question waits it is sent with the user's next message (see `follow_ups`).
        """
        return await self._follow_ups.follow_up(job, on_event=on_event)

    async def deliver(self, job: BackgroundJob) -> None:
        """Report how a background job ended: its follow-up turn, then `on_follow_up`."""
        result = await self.follow_up(job)
        if self.on_follow_up is not None:
            self.on_follow_up(job, result)

    async def plan(self) -> PlanView | None:
        """The session's last plan, as shown (None: its model never made one)."""
        plan = (await self._thread.state()).values.get("plan")
        return plan_view(plan) if plan else None

    async def pending(self) -> list[PendingQuestion]:
        """The questions the session's turn waits on, in the order of its calls (empty: none)."""
        return await self._questions.pending()

    async def answer(self, decisions: Mapping[str, Decision], **watchers: Unpack[Watchers]) -> TurnResult:
        """Resume the waiting turn once, with the person's decisions keyed by question id.

        A question left without a decision is asked again (its call pauses once
        more); calls that had finished do not run again. The result is the
        turn's answer, or the questions it waits on next.
        """
        await self._claim()
        async with self._holding():
            state = await self._thread.state()
            self._questions.accept(state, decisions)
            if decisions:
                async with self._run.traced(turn_start(messages_of(state)), kind="turn (answered)"):
                    resume: Command[str] = Command(resume=dict(decisions))
                    outcome = await self._run.stream(resume, **watchers)
                return self._result(outcome)
        return self._result(Outcome.of(state))

    async def open(self) -> bool:
        """Claim the session and archive what a stopped process left; True if a turn is unfinished.

        A turn that waits for answers is not unfinished: it goes on with `answer`
        (`pending` lists its questions), never by running its paused calls again.
        """
        await self._claim()
        # Holding the turn: a follow-up turn running now, here or in another
        # process, is not one a stopped process left unfinished.
        async with self._holding():
            state = await self._archive.update()
            return bool(state.next) and not state.interrupts

    async def resume(self, **watchers: Unpack[Watchers]) -> TurnResult:
        """Finish the turn a stopped process left half done (see `open`).

        A turn that waits for answers is not run: the result holds its questions.
        """
        await self._claim()
        async with self._holding():
            state = await self._thread.state()
            if not state.next:
                return TurnResult(answer="", answer_id=None, iterations=0, tool_calls=[])
            if state.interrupts:
                return self._result(Outcome.of(state))
            self._questions.new_turn()
            start = turn_start(messages_of(state))
            self.usage.start_turn(start)
            async with self._run.traced(start, kind="turn (resumed)"):
                outcome = await self._run.stream(None, **watchers)
            return self._result(outcome)

    async def history(self) -> list[BaseMessage]:
        """Every message of the conversation so far: those a summary stands for from the archive."""
        return await self._archive.history()

    async def keep_summary(self, summary: Summary) -> None:
        """Store a summary written outside a turn (a person's `/compact`), as a turn's is."""
        async with self._holding():
            await self._archive.keep_summary(summary)

    async def _turn_with(
        self, message: HumanMessage, on_event: EventHandler | None, *, on_part: PartHandler | None = None
    ) -> TurnResult:
        # First of all: it reads the user's other sessions only, so neither the claim
        # nor this session's lease need come before it.
        lookup = look_up(self._thread, message)
        try:
            await self._claim()
            async with self._holding(), self._run.traced(message.id):
                try:
                    waiting = await self._questions.waiting()
                    if waiting:
                        raise QuestionsWaitingError(self.session_id, len(waiting))
                    kept = self._follow_ups.take_kept()
                    self._questions.new_turn()
                    self.usage.start_turn(message.id)
                    turn_input = OrchestratorState(messages=[*kept, message])
                    watchers = Watchers(on_event=on_event, on_part=on_part)
                    outcome = await self._run.stream(turn_input, lookup=lookup, **watchers)
                finally:
                    self._questions.forget_peek()
        finally:
            let_go(lookup)
        return self._result(outcome, start=message.id)

    def _result(self, outcome: Outcome, *, start: str | None = None) -> TurnResult:
        return self._run.result(outcome, answered=self._questions.answered, start=start)

    @asynccontextmanager
    async def _holding(self) -> AsyncIterator[None]:
        """One turn at a time: in this process (a lock) and across processes (the lease)."""
        async with self._turn:
            if self.storage is None:
                yield
                return
            async with self.storage.leases.hold(self.session_id, on_wait=self.on_busy):
                yield

    async def _claim(self) -> None:
        if self.storage is not None and not self._claimed:
            database = self.storage.database
            await claim_session(database, self.session_id, user_id=self.user_id)
            # A budget for the session counts what it spent in earlier processes too.
            self.usage.seed(await session_totals(database, self.session_id, user_id=self.user_id))
            self._claimed = True


# The turn's types are imported from here too, as before they had a module of their own.
__all__ = [
    "EventHandler",
    "PartHandler",
    "PendingQuestion",
    "QuestionsWaitingError",
    "Session",
    "TokenEvent",
    "ToolCallRecord",
    "TurnEvent",
    "TurnResult",
]
