"""The runs `orchestrator serve` holds: started on a user's thread, followed, cancelled, drained.

A run is one turn of a thread's session (`Session.run`), or the answers to the
questions a paused one waits on (`Session.answer`): the same graph, pipeline,
request log and budgets as `chat`. One run at a time per thread, as a session
takes one turn at a time; the `multitask_strategy` says what a second one does.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from weakref import WeakValueDictionary

from langchain_core.messages import HumanMessage, convert_to_messages
from pydantic import JsonValue, TypeAdapter, ValidationError

from orchestrator.api.assistants import Assistants
from orchestrator.api.bodies import RunCreate
from orchestrator.api.identity import Identity
from orchestrator.api.live_run import LiveRun
from orchestrator.api.stream_events import EventStream
from orchestrator.conversation.session import Session
from orchestrator.errors import RequestRefusedError as Problem
from orchestrator.errors import UserError, validation_problems
from orchestrator.store.runs import RunRow, RunStatus, create_run, set_run_status
from orchestrator.store.storage import Storage
from orchestrator.store.threads import create_thread, get_thread, update_thread
from orchestrator.tools.hitl import Decision

logger = logging.getLogger(__name__)

DECISIONS: TypeAdapter[dict[str, Decision]] = TypeAdapter(dict[str, Decision])
RUNS_KEPT = 1000  # ended runs whose events are kept, the latest
SESSIONS_KEPT = 512  # idle sessions kept open between runs (a run's own is never let go)
SHUT_DOWN = "the server shut down before the turn ended: send the message again"
ONE_MESSAGE = "input.messages must hold exactly one user message (the turn's)"
OTHER_ASSISTANT = "thread {thread} belongs to assistant {name}"


class RunBoard:
    """Every live run of this server, and the sessions they run in."""

    def __init__(self, storage: Storage, assistants: Assistants) -> None:
        self._storage = storage
        self._assistants = assistants
        self._runs: OrderedDict[str, LiveRun] = OrderedDict()  # in the order they started
        self._busy: dict[str, LiveRun] = {}  # thread id -> its run now
        # A lock per thread while a run of it starts; gone once no start holds or awaits it.
        self._starting: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()
        self._sessions: OrderedDict[tuple[str, str, str], Session] = OrderedDict()
        self._waits: dict[str, bool] = {}  # thread id -> whether questions waited at its last run's end
        self._bound: dict[tuple[str, str], str] = {}  # (user, thread) -> the assistant it is bound to
        self.draining = False

    def live(self, run_id: str, *, identity: Identity) -> LiveRun | None:
        """The user's run `run_id` while this server holds it (another user's: None)."""
        run = self._runs.get(run_id)
        return run if run is not None and run.row.user_id == identity.user_id else None

    def busy(self, thread_id: str) -> LiveRun | None:
        """The run going on in `thread_id` now, if any."""
        run = self._busy.get(thread_id)
        return run if run is not None and not run.done else None

    @property
    def running(self) -> int:
        """How many runs are running now."""
        return len(self._running())

    def _running(self) -> list[asyncio.Task[None]]:
        return [run.task for run in self._runs.values() if run.task is not None and not run.task.done()]

    async def start(self, thread_id: str, body: RunCreate, *, identity: Identity) -> LiveRun:
        """Start a run of the user's thread as `body` asks; a `Problem` says why not."""
        if self.draining:
            raise Problem(503, "the server is shutting down: try again on its next start")
        if (field := body.refused()) is not None:
            raise Problem(422, f"{field} is not supported by orchestrator serve")
        assistant = self._assistants.named(body.assistant_id)  # 404: no such assistant
        await self._thread(thread_id, body, assistant_id=assistant.assistant_id, identity=identity)
        session = self.session(assistant.assistant_id, thread_id, identity=identity)
        # One start at a time per thread: two requests at once must not both find it free.
        async with self._starting.setdefault(thread_id, asyncio.Lock()):
            await self._make_room(thread_id, body)
            ahead = self.busy(thread_id)  # enqueued behind it: pending until it ends
            turn = await _turn_of(body, session, waits=self._waits.get(thread_id, True))
            row = await create_run(
                self._storage.database,
                uuid.uuid4().hex,
                thread_id=thread_id,
                user_id=identity.user_id,
                assistant_id=assistant.assistant_id,
                metadata=body.metadata,
                multitask_strategy=body.multitask_strategy,
            )
            stream = EventStream(body.stream_mode, run_id=row.run_id)
            return self._launch(row, session, turn, stream=stream, after=ahead)

    def resume(self, row: RunRow, session: Session) -> LiveRun:
        """Finish the turn a stopped server left half done, as the run it was."""
        return self._launch(row, session, None, stream=EventStream(["values"], run_id=row.run_id))

    def session(self, assistant_id: str, thread_id: str, *, identity: Identity | str) -> Session:
        """The thread's session (kept open between runs), for its user."""
        user_id = identity if isinstance(identity, str) else identity.user_id
        assistant = self._assistants.named(assistant_id)
        key = (assistant.assistant_id, user_id, thread_id)
        session = self._sessions.get(key)
        if session is None:
            session = assistant.runtime.session(user_id=user_id, session_id=thread_id)
            # A background job's follow-up turn may leave questions waiting: read at the next start.
            session.on_follow_up = lambda _job, _turn: self._forget_waits(thread_id)
            self._sessions[key] = session
            self._let_go_of_idle()
        self._sessions.move_to_end(key)
        return session

    async def cancel(self, run: LiveRun) -> None:
        """Stop the run (its history mended, as Ctrl-C in `chat` does) and wait for its end."""
        if run.task is not None:
            run.task.cancel()
        await run.ended()

    async def drain(self, *, grace_seconds: float) -> list[str]:
        """Shutting down: no new run; those running finish within `grace_seconds`, else are stopped.

        A stopped run is cancelled as Ctrl-C cancels a turn (its history mended),
        and ends `interrupted`, saying so. The ids of those stopped.
        """
        self.draining = True
        running = self._running()
        if not running:
            return []
        _, left = await asyncio.wait(running, timeout=grace_seconds)
        stopped = [run.run_id for run in self._runs.values() if run.task in left]
        for task in left:
            task.cancel()
        if left:
            await asyncio.wait(left)
        return stopped

    def _launch(
        self,
        row: RunRow,
        session: Session,
        turn: str | dict[str, Decision] | None,
        *,
        stream: EventStream,
        after: LiveRun | None = None,
    ) -> LiveRun:
        """The run's task started: a message (str), answers (decisions) or a resumed turn (None);
        it begins once the run `after` it (enqueued) has ended."""
        run = LiveRun(row, stream)
        self._runs[row.run_id] = self._busy[row.thread_id] = run
        run.task = asyncio.create_task(self._execute(run, session, turn, after), name=f"run {row.run_id}")
        return run

    async def _execute(
        self, run: LiveRun, session: Session, turn: str | dict[str, Decision] | None, after: LiveRun | None
    ) -> None:
        database, user_id = self._storage.database, run.row.user_id
        status: RunStatus = "error"
        error: str | None = None
        try:
            if after is not None:
                await after.ended()
            self._waits.pop(run.row.thread_id, None)  # known again once this run has ended
            await set_run_status(database, run.run_id, user_id=user_id, status="running")
            if isinstance(turn, str):
                result = await session.run(turn, on_part=run.part)
            elif turn is not None:
                result = await session.answer(turn, on_part=run.part)
            else:
                result = await session.resume(on_part=run.part)
            status = "interrupted" if result.questions else "success"
            self._waits[run.row.thread_id] = bool(result.questions)
            if "custom" in run.stream.modes:
                run.emit(("custom", {"kind": "turn_result", **result.to_json()}))
        except asyncio.CancelledError:
            status, error = "interrupted", SHUT_DOWN if self.draining else "cancelled"
            raise
        except UserError as failure:
            error = str(failure)
            run.emit(("error", {"error": type(failure).__name__, "message": error}))
        except Exception as failure:
            logger.exception("run %s failed", run.run_id)
            error = f"internal error ({type(failure).__name__})"
            run.emit(("error", {"error": "InternalError", "message": error}))
        finally:
            if not run.done:
                await asyncio.shield(self._settle(run, status, error))

    async def _settle(self, run: LiveRun, status: RunStatus, error: str | None) -> None:
        try:
            await set_run_status(
                self._storage.database, run.run_id, user_id=run.row.user_id, status=status, error=error
            )
        except Exception as failure:  # the database went away: the next start settles it
            logger.warning("run %s: its end was not recorded: %s", run.run_id, failure)
        finally:
            run.finish(status)
            self._forget_old_runs()

    def _forget_old_runs(self) -> None:
        """Keep the events of the latest `RUNS_KEPT` runs for `join` and re-streaming; older
        ones are read from the database (their status) and the thread (its values)."""
        ended = [run_id for run_id, run in self._runs.items() if run.done]
        for run_id in ended[: max(0, len(ended) - RUNS_KEPT)]:
            run = self._runs.pop(run_id)
            if self._busy.get(run.row.thread_id) is run:
                del self._busy[run.row.thread_id]

    async def _thread(self, thread_id: str, body: RunCreate, *, assistant_id: str, identity: Identity) -> None:
        """The thread exists (or is made, `if_not_exists="create"`), and is the assistant's.

        Known from an earlier run here, it is not read again (`forget` when it is deleted).
        """
        database, user_id = self._storage.database, identity.user_id
        known = self._bound.get((user_id, thread_id))
        if known is not None:
            if known != assistant_id:
                raise Problem(409, OTHER_ASSISTANT.format(thread=thread_id, name=self._name(known)))
            return
        thread = await get_thread(database, thread_id, user_id=user_id)
        if thread is None and body.if_not_exists != "create":
            raise Problem(404, f"thread {thread_id} not found")
        if thread is None:
            thread = await create_thread(database, thread_id, user_id=user_id)
            if thread is None:
                raise Problem(409, f"thread id {thread_id} is taken")
        owner = thread.metadata.get("assistant_id")
        if owner is None:  # its first run: a thread's checkpoints are one graph's
            bound = {"assistant_id": assistant_id, "graph_id": self._assistants.named(assistant_id).graph_id}
            await update_thread(database, thread_id, user_id=user_id, metadata=bound)
        elif owner != assistant_id:
            name = thread.metadata.get("graph_id") or self._name(str(owner))
            raise Problem(409, OTHER_ASSISTANT.format(thread=thread_id, name=name))
        self._bound[(user_id, thread_id)] = assistant_id

    def _name(self, assistant_id: str) -> str:
        """The graph name of an assistant (its id, if this server no longer offers it)."""
        try:
            return self._assistants.named(assistant_id).graph_id
        except Problem:
            return assistant_id

    def _forget_waits(self, thread_id: str) -> None:
        self._waits.pop(thread_id, None)

    def forget(self, thread_id: str, *, user_id: str) -> None:
        """The user's thread was deleted: nothing of it is kept here."""
        self._bound.pop((user_id, thread_id), None)
        self._waits.pop(thread_id, None)
        for key in [key for key in self._sessions if key[1:] == (user_id, thread_id)]:
            del self._sessions[key]

    async def _make_room(self, thread_id: str, body: RunCreate) -> None:
        current = self.busy(thread_id)
        if current is None or body.multitask_strategy == "enqueue":
            return  # enqueued: the session takes one turn at a time
        if body.multitask_strategy == "reject":
            raise Problem(409, f"thread {thread_id} is running {current.run_id}: wait for it, or cancel it")
        await self.cancel(current)  # "interrupt"

    def _let_go_of_idle(self) -> None:
        busy = {(run.row.assistant_id, run.row.user_id, run.row.thread_id) for run in self._busy.values() if not run.done}
        for key in list(self._sessions):
            if len(self._sessions) <= SESSIONS_KEPT:
                return
            if key not in busy:
                del self._sessions[key]
                self._waits.pop(key[2], None)
                self._bound.pop(key[1:], None)


async def _turn_of(body: RunCreate, session: Session, *, waits: bool) -> str | dict[str, Decision]:
    """The user's message, or the decisions on the questions the thread's turn waits on.

    `waits` False: the thread's last turn here (a run, or a background job's follow-up)
    ended with no question waiting, so its checkpoint is not read to know.
    """
    waiting = await session.pending() if waits or body.command is not None else []
    if body.command is not None and body.input is not None:
        raise Problem(422, "give input or command, not both")
    if body.command is None:
        if waiting:
            raise Problem(409, f"the thread waits for answers to {len(waiting)} question(s): resume it with command")
        return _message_text(body.input)
    if not waiting:
        raise Problem(409, "nothing in this thread waits for an answer")
    answers = body.command.resume
    if len(waiting) == 1 and not (isinstance(answers, dict) and waiting[0].id in answers):
        answers = {waiting[0].id: answers}
    try:
        return DECISIONS.validate_python(answers)
    except ValidationError as problem:
        raise Problem(422, f"command.resume: {validation_problems(problem)}") from problem


def _message_text(given: Mapping[str, JsonValue] | None) -> str:
    raw = (given or {}).get("messages")
    try:
        messages = convert_to_messages(raw) if isinstance(raw, list) else []  # pyright: ignore[reportArgumentType]  # JSON message dicts
    except (ValueError, TypeError, NotImplementedError) as problem:
        raise Problem(422, f"input.messages: {problem}") from problem
    if len(messages) != 1 or not isinstance(messages[0], HumanMessage) or not messages[0].text:
        raise Problem(422, ONE_MESSAGE)
    return messages[0].text
