"""One conversation: runs the agent graph turn by turn and streams what happens.

What a turn led to (`TurnResult` and its parts) is in `orchestrator.conversation.turns`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot, StreamPart

from orchestrator.conversation.held_text import HeldText
from orchestrator.conversation.job_board import BackgroundJob, JobBoard
from orchestrator.conversation.turns import (
    AnsweredQuestion,
    EventHandler,
    PendingQuestion,
    TokenEvent,
    ToolCallRecord,
    TurnEvent,
    TurnResult,
    collect_turn,
    messages_of,
    questions_of,
    turn_plan,
)
from orchestrator.errors import QuestionsWaitingError, ToolError, UserError
from orchestrator.events import PlanEvent, Stage, StatusEvent, ToolEvent
from orchestrator.graph.builder import MODEL_NODE
from orchestrator.graph.model_pipeline.compaction import summarised
from orchestrator.graph.planning.executor import end_plan_request
from orchestrator.graph.planning.lifecycle import ended
from orchestrator.graph.prompts import CANCELLED_CALL, CANCELLED_TURN, FOLLOW_UP_LIMIT
from orchestrator.graph.state import Summary
from orchestrator.notes import is_persons, note, turn_start
from orchestrator.plans import Plan, PlanView, plan_view
from orchestrator.settings import Settings
from orchestrator.store.archived import archived_messages
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.store.sessions import claim_session
from orchestrator.store.storage import Storage
from orchestrator.store.text import storable_text
from orchestrator.store.usage_log import session_totals
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.hitl import Decision
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import span
from orchestrator.usage.meter import UsageMeter


@dataclass(frozen=True)
class TurnWindow:
    """When a turn ran, and the id of the message it began with (what `/trace` draws)."""

    turn_id: str
    began: datetime
    ended: datetime


@dataclass(frozen=True)
class Outcome:
    """Where a run of the graph left the conversation: its messages, the questions it waits on."""

    messages: list[BaseMessage]
    waiting: list[PendingQuestion]
    summary: Summary | None = None
    plan: Plan | None = None  # the state's last plan (see graph.planning)

    @classmethod
    def of(cls, state: StateSnapshot) -> Outcome:
        values = state.values
        return cls(messages_of(state), questions_of(state), values.get("summary"), values.get("plan"))


FOLLOW_UP = (
    "Background job {job_id} ({tool}) has {status}. Its result: {result}\n"
    "Tell the user what came of it."
)
BACKGROUND_NOTE = "background_task"
FollowUpHandler = Callable[["BackgroundJob", "TurnResult | None"], None]


class Session:
    """A conversation of one user, remembered by the graph's checkpointer under `session_id`.

    With storage, the session is claimed for its user, every message is
    archived (searchable, embedded later), tool calls are tracked, and a turn
    a killed process left unfinished can be resumed.
    """

    def __init__(
        self,
        *,
        graph: CompiledStateGraph,
        settings: Settings,
        user_id: str,
        session_id: str | None = None,
        storage: Storage | None = None,
        jobs: JobBoard | None = None,
    ) -> None:
        self.graph = graph
        self.settings = settings
        self.user_id = user_id
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self.storage = storage
        self.jobs = jobs
        # Called with each background task's follow-up turn once it has run, or with
        # None when the follow-up limit kept the result for the next turn instead.
        self.on_follow_up: FollowUpHandler | None = None
        self.usage = UsageMeter(prices=settings.price_table, budgets=settings.budgets)
        self._follow_ups = 0  # follow-up turns since the user's last message
        self._claimed = False
        self._archived: set[str] = set()  # ids of the messages this process archived
        self._turns = 0  # turns this object ran (the turn span's number)
        self.last_turn: TurnWindow | None = None  # the last turn this object ran (`/trace`)
        self._turn = asyncio.Lock()  # one turn at a time: the user's, a resumed one, a follow-up
        self._answered: list[AnsweredQuestion] = []  # the current turn's questions answered here
        self._kept: list[BaseMessage] = []  # follow-up notices kept while a question waited
        # Called once when another process runs a turn of this session and this one waits.
        self.on_busy: Callable[[], None] | None = None
        if jobs is not None:
            jobs.deliver_to(self.session_id, self.deliver, user_id=user_id)

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
        )

    async def run(self, text: str, *, on_event: EventHandler | None = None) -> TurnResult:
        """Send one user message and run the graph until the model answers or a question waits.

        While the session's turn waits for answers (see `pending`), a new message
        would drop the paused calls: it raises `QuestionsWaitingError` instead.
        """
        self._follow_ups = 0
        return await self._turn_with(HumanMessage(content=text, id=uuid.uuid4().hex), on_event)

    async def follow_up(
        self, task: BackgroundJob, *, on_event: EventHandler | None = None
    ) -> TurnResult | None:
        """Tell the model how a background task ended, and let it report to the user.

        Past `max_follow_ups` follow-ups since the user's last message, the
        result is only added to the conversation (the model sees it next turn)
        and None is returned: a task whose report starts another task cannot
        chain turns forever. While a question waits, the result is kept and
        sent with the user's next message (None is returned too).
        """
        body = task.result.to_model_text(max_chars=self.settings.max_tool_result_chars) if task.result else "{}"
        notice = FOLLOW_UP.format(job_id=task.job_id, tool=task.tool, status=task.status, result=body)
        if self._follow_ups >= self.settings.max_follow_ups:
            await self._end_turn_with([note(f"{notice}\n{FOLLOW_UP_LIMIT}", kind=BACKGROUND_NOTE)])
            return None
        message = note(notice, kind=BACKGROUND_NOTE)
        self._follow_ups += 1
        try:
            return await self._turn_with(message, on_event)
        except QuestionsWaitingError:
            self._follow_ups -= 1  # no turn ran
            self._kept.append(message)
            return None

    async def _turn_with(self, message: BaseMessage, on_event: EventHandler | None) -> TurnResult:
        # First of all: it reads the user's other sessions only, so neither the claim
        # nor this session's lease need come before it.
        lookup = self._look_up(message)
        try:
            await self._claim()
            async with self._holding(), self._traced(message.id):
                try:
                    waiting = await self._waiting()
                    if waiting:
                        raise QuestionsWaitingError(self.session_id, len(waiting))
                    kept, self._kept = self._kept, []
                    self._answered = []
                    self.usage.start_turn(message.id)
                    turn_input = {"messages": [*kept, message]}
                    outcome = await self._stream(turn_input, on_event, lookup=lookup)
                finally:
                    self._forget_peek()
        finally:
            _let_go(lookup)
        return self._result(outcome, start=message.id)

    def _look_up(self, message: BaseMessage) -> asyncio.Task[str] | None:
        """Start looking up RAG context for `message`, beside the work before the model."""
        if self.storage is None or not is_persons(message):
            return None
        query = storable_text(message.text)  # PostgreSQL takes no NUL, not even in a query
        retrieve = self.storage.retriever(query, user_id=self.user_id, session_id=self.session_id)
        return asyncio.ensure_future(retrieve)

    async def _end_turn_with(self, messages: list[BaseMessage]) -> None:
        """Add `messages` to the conversation as the end of a turn, without running the model.

        While a question waits they are kept for the next turn instead: a new
        checkpoint would drop the paused calls.
        """
        async with self._holding():
            if (await self.graph.aget_state(self.config)).interrupts:
                self._kept.extend(messages)
                return
            await self.graph.aupdate_state(self.config, {"messages": messages}, as_node=MODEL_NODE)
            await self._archive()

    async def plan(self) -> PlanView | None:
        """The session's last plan, as shown (None: its model never made one)."""
        plan = (await self.graph.aget_state(self.config)).values.get("plan")
        return plan_view(plan) if plan else None

    async def pending(self) -> list[PendingQuestion]:
        """The questions the session's turn waits on, in the order of its calls (empty: none)."""
        return questions_of(await self.graph.aget_state(self.config))

    @property
    def _pooled(self) -> PooledPostgresSaver | None:
        """The graph's checkpointer when it is ours (peeks, riders); None for any other."""
        checkpointer = self.graph.checkpointer
        return checkpointer if isinstance(checkpointer, PooledPostgresSaver) else None

    async def _waiting(self) -> list[PendingQuestion]:
        """`pending`, from the checkpoint the run that follows reads too when none wait."""
        pooled = self._pooled
        if pooled is not None and not await pooled.may_wait(self.session_id):
            return []
        return await self.pending()

    def _forget_peek(self) -> None:
        if (pooled := self._pooled) is not None:
            pooled.forget(self.session_id)

    async def answer(
        self, decisions: Mapping[str, Decision], *, on_event: EventHandler | None = None
    ) -> TurnResult:
        """Resume the waiting turn once, with the person's decisions keyed by question id.

        A question left without a decision is asked again (its call pauses once
        more); calls that had finished do not run again. The result is the
        turn's answer, or the questions it waits on next.
        """
        await self._claim()
        async with self._holding():
            state = await self.graph.aget_state(self.config)
            asked = {q.id: q for q in questions_of(state)}
            unknown = [question_id for question_id in decisions if question_id not in asked]
            if unknown:
                raise UserError(
                    f"No open question {unknown[0]} in session {self.session_id}: answered already?"
                )
            if decisions:
                self._answered += [AnsweredQuestion(asked[i], d) for i, d in decisions.items()]
                async with self._traced(turn_start(messages_of(state)), kind="turn (answered)"):
                    outcome = await self._stream(Command(resume=dict(decisions)), on_event)
                return self._result(outcome)
        return self._result(Outcome.of(state))

    async def _close_cancelled_turn(self) -> None:
        """Leave a valid history after a cancelled turn: every call answered, the turn ended.

        Without this the checkpoint would still say the turn is due to go on,
        and reopening the session would run it (and its tools) again.
        """
        state = await self.graph.aget_state(self.config)
        if not state.next:
            return
        cancelled = ToolResult.from_error(
            ToolError(CANCELLED_CALL, code="cancelled", recoverable=False)
        )
        content = cancelled.to_model_text(max_chars=self.settings.max_tool_result_chars)
        notes = [
            ToolMessage(content=content, tool_call_id=call["id"], name=call["name"], status="error")
            for call in _unanswered_calls(state.values.get("messages", []))
        ]
        update: dict[str, object] = {"messages": [*notes, AIMessage(content=CANCELLED_TURN)]}
        plan = state.values.get("plan")
        if plan and plan["status"] == "running":  # its tasks not run are not run later either
            update["plan"] = finished = ended(plan, "cancelled")
            await end_plan_request(finished, cancelled, context=self.context)
        await self.graph.aupdate_state(self.config, update, as_node=MODEL_NODE)

    async def deliver(self, task: BackgroundJob) -> None:
        """Report how a background task ended: its follow-up turn, then `on_follow_up`."""
        result = await self.follow_up(task)
        if self.on_follow_up is not None:
            self.on_follow_up(task, result)

    async def open(self) -> bool:
        """Claim the session and archive what a stopped process left; True if a turn is unfinished.

        A turn that waits for answers is not unfinished: it goes on with `answer`
        (`pending` lists its questions), never by running its paused calls again.
        """
        await self._claim()
        # Holding the turn: a follow-up turn running now, here or in another
        # process, is not one a stopped process left unfinished.
        async with self._holding():
            state = await self._archive()
            return bool(state.next) and not state.interrupts

    async def resume(self, *, on_event: EventHandler | None = None) -> TurnResult:
        """Finish the turn a stopped process left half done (see `open`).

        A turn that waits for answers is not run: the result holds its questions.
        """
        await self._claim()
        async with self._holding():
            state = await self.graph.aget_state(self.config)
            if not state.next:
                return TurnResult(answer="", answer_id=None, iterations=0, tool_calls=[])
            if state.interrupts:
                return self._result(Outcome.of(state))
            self._answered = []
            start = turn_start(messages_of(state))
            self.usage.start_turn(start)
            async with self._traced(start, kind="turn (resumed)"):
                outcome = await self._stream(None, on_event)
            return self._result(outcome)

    async def history(self) -> list[BaseMessage]:
        """Every message of the conversation so far: those a summary stands for from the archive."""
        held = messages_of(await self.graph.aget_state(self.config))
        if self.storage is None:
            return held
        ids = {m.id for m in held}
        archived = await archived_messages(self.storage.database, self.session_id, user_id=self.user_id)
        return [*(m for m in archived if m.id not in ids), *held]

    async def keep_summary(self, summary: Summary) -> None:
        """Store a summary written outside a turn (a person's `/compact`), as a turn's is."""
        async with self._holding():
            state = await self._archive()
            update: dict[str, object] = {"summary": summary}
            update.update(self._forgetting(messages_of(state), summary))
            await self.graph.aupdate_state(self.config, update, as_node=MODEL_NODE)

    async def _forget_summarised(self, messages: list[BaseMessage], summary: Summary | None) -> None:
        """Drop from the checkpoint the archived messages of earlier turns a summary stands for.

        LangGraph reads and writes a thread's whole `messages` channel every step:
        kept, a long conversation would cost each turn in proportion to its length.
        """
        forgetting = self._forgetting(messages, summary)
        if forgetting:
            await self.graph.aupdate_state(self.config, forgetting, as_node=MODEL_NODE)

    def _forgetting(self, messages: list[BaseMessage], summary: Summary | None) -> dict[str, object]:
        """The update that removes them (empty: none to remove, or no archive to keep them)."""
        if self.storage is None:
            return {}
        start = turn_start(messages)
        gone: list[BaseMessage] = []
        for message in summarised(messages, summary):
            if message.id == start:  # the last turn stays whole, for its result and a resume
                break
            if message.id in self._archived:
                gone.append(RemoveMessage(id=message.id))
        return {"messages": gone} if gone else {}

    async def _stream(
        self,
        turn_input: dict[str, object] | Command | None,
        on_event: EventHandler | None,
        *,
        lookup: asyncio.Future[str] | None = None,
    ) -> Outcome:
        """Run the graph, forwarding its events; where it left the turn, its history archived."""
        held = HeldText() if self.settings.text_tool_calls else None
        last: StreamPart | None = None  # the run's last top-level state
        interrupted = False
        try:
            async for part in self.graph.astream(
                turn_input,
                self.config,
                context=replace(self.context, lookup=lookup),
                # Without a handler nothing shows tokens or progress: only states are read.
                stream_mode=["custom", "messages", "values"] if on_event is not None else ["values"],
                subgraphs=True,
                # With storage, each step is saved before the next starts: a killed
                # process resumes from the last one.
                durability="sync" if self.storage is not None else "async",
                version="v2",
            ):
                if part["type"] == "values":
                    if not part["ns"]:  # as LangGraph's `ainvoke` reads a run
                        last, interrupted = part, interrupted or bool(part["interrupts"])
                    continue
                event = _to_event(part)
                if event is not None and on_event is not None:
                    for shown in held.filter(event) if held is not None else [event]:
                        on_event(shown)
            if held is not None and on_event is not None:
                for shown in held.release():  # text no stage settled: a stop's notice
                    on_event(shown)
        except asyncio.CancelledError:
            # Shielded: a second Ctrl-C must not leave the history half mended.
            await asyncio.shield(self._after_cancel())
            raise
        except Exception as error:
            with suppress(Exception):  # keep the user's message even when the turn failed
                await self._archive()
            # Imported only now: the OpenAI client it knows costs a second to import.
            from orchestrator.llm.model_errors import explain_model_error

            explained = explain_model_error(error, settings=self.settings)
            if explained is None:
                raise
            raise explained from error
        finally:
            await asyncio.shield(self._drop_off())
        messages = list(last["data"].get("messages", [])) if last is not None else []
        if last is None or interrupted or _unanswered_calls(messages):
            # Paused, or ended unlike a finished turn: the state as the checkpoint has it.
            return Outcome.of(await self._archive())
        await self._store(messages)
        summary = last["data"].get("summary")
        await self._forget_summarised(messages, summary)
        return Outcome(messages, [], summary, last["data"].get("plan"))

    async def _drop_off(self) -> None:
        """Calls' ends that waited for their task's checkpoint writes, which never came."""
        if (pooled := self._pooled) is not None:
            await pooled.drop_off(self.session_id)

    async def _after_cancel(self) -> None:
        try:
            await self._close_cancelled_turn()
        finally:
            await self._archive()

    @asynccontextmanager
    async def _traced(self, turn_id: str | None, *, kind: str = "turn") -> AsyncIterator[None]:
        """The turn's span, when tracing is on (its model and tool calls are below it); its window."""
        self._turns += 1
        attributes = {
            "orchestrator.session_id": self.session_id,
            "enduser.id": self.user_id,
            "orchestrator.turn_id": turn_id,
            "orchestrator.turn": self._turns,
        }
        began = datetime.now(UTC)
        try:
            with span(kind, attributes):
                yield
        finally:
            self.last_turn = TurnWindow(turn_id or "", began, datetime.now(UTC))

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

    async def _archive(self) -> StateSnapshot:
        """Store what the history gained since the last archive; the state it is part of."""
        state = await self.graph.aget_state(self.config)
        await self._store(messages_of(state))
        return state

    async def _store(self, history: list[BaseMessage]) -> None:
        """Archive what `history` gained since the last archive."""
        # By id, not by count: a resumed turn may add a tool message before older ones
        # (LangGraph keeps the calls' order, not the order they finished in).
        if self.storage is not None:
            new = [m for m in history if m.id not in self._archived]
            await self.storage.messages.save(new, session_id=self.session_id, user_id=self.user_id)
            self._archived.update(m.id for m in new if m.id)

    def _result(self, outcome: Outcome, *, start: str | None = None) -> TurnResult:
        """The turn that began with message `start` (default: the last one a turn begins with)."""
        start = start or turn_start(outcome.messages)
        turn = collect_turn(outcome.messages, after=start, waiting=outcome.waiting)
        return replace(
            turn,
            answered=list(self._answered),
            usage=self.usage.turn,
            budget_stop=self.usage.stop,
            compacted=_compacted(outcome.summary, start=start),
            plan=turn_plan(outcome.plan, start=start),
        )


def _compacted(summary: Summary | None, *, start: str | None) -> dict[str, object] | None:
    """What the turn that began with message `start` compacted, if it did."""
    if not summary or start is None or summary.get("turn") != start:
        return None
    return {"saved_tokens": summary.get("saved", 0), "failed": bool(summary.get("failed"))}


def _let_go(lookup: asyncio.Future[str] | None) -> None:
    """A turn's lookup the model node may not have waited for: stopped, its failure seen."""
    if lookup is None:
        return
    if lookup.done() and not lookup.cancelled():
        lookup.exception()  # retrieved: a failed lookup is no unhandled error
    lookup.cancel()


def _to_event(part: StreamPart) -> TurnEvent | None:
    # Sub-agents run as subgraphs (a non-empty namespace): their tool progress is
    # shown one level deeper per graph, and their compactions (which name them);
    # their other stages and replies are theirs.
    namespace = part["ns"]
    if part["type"] == "custom":
        event: StatusEvent | ToolEvent | PlanEvent = part["data"]  # only our nodes write it
        if event["kind"] in ("tool", "plan"):
            return {**event, "depth": len(namespace)}  # type: ignore[return-value]
        return None if namespace and event["stage"] != Stage.COMPACTED else event
    message, metadata = part["data"]  # type: ignore[misc]  # the messages mode's pair
    is_reply = isinstance(message, AIMessageChunk | AIMessage)
    if namespace or not is_reply or metadata.get("langgraph_node") != MODEL_NODE:
        return None
    return TokenEvent(kind="token", text=message.text, message_id=message.id) if message.text else None


def _unanswered_calls(messages: list[BaseMessage]) -> list[ToolCall]:
    """The tool calls of the last model message that no tool message answers yet."""
    last_reply = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last_reply is None:
        return []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [call for call in last_reply.tool_calls if call["id"] not in answered]


# The turn's types are imported from here too, as before they had a module of their own.
__all__ = [
    "EventHandler",
    "PendingQuestion",
    "Session",
    "TokenEvent",
    "ToolCallRecord",
    "TurnEvent",
    "TurnResult",
]
