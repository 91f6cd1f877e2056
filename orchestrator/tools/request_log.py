"""What the request log and the background runner are told about a call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict

from orchestrator.tools.request_status import ENDED, RequestStatus
from orchestrator.tools.results import ToolResult
from orchestrator.usage.records import UsageRecord

if TYPE_CHECKING:
    from datetime import datetime

    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool

logger = logging.getLogger(__name__)

# What the request log says of a call a stopped process left running (see `dispatch.replay`).
INTERRUPTED = "interrupted: the process running it stopped"
# Where LangGraph keeps a task's id in the task's config (its own constant is private).
TASK_ID_KEY = "__pregel_task_id"


@dataclass(frozen=True)
class PriorCall:
    """What the request log holds for a call about to run."""

    status: RequestStatus
    outcome: RequestStatus | None  # how it ended (completed, failed, cancelled); None: not yet
    body: dict[str, object] | None  # the result, or the error
    owner_alive: bool
    ours: bool  # owned by this process
    same_call: bool = True  # the record is of this tool with these arguments
    queued: bool = False  # a job of the queue holds it: it runs, or will, on a worker

    @property
    def ended(self) -> bool:
        return self.outcome in ENDED or self.status in ENDED


class PriorLog(Protocol):
    """The part of the request log a replay decision needs."""

    async def prior(self, call: CallRecord) -> PriorCall | None: ...

    async def requeued(self, call: CallRecord) -> None: ...

    async def resumed(self, call: CallRecord) -> None: ...

    async def interrupted(self, call: CallRecord) -> None: ...


# Where LangGraph keeps a task's graph's checkpointer in the task's config (its own
# constant is private): should it move, calls end as they did before tasks were known
# (see `CallTask`).
CHECKPOINTER_KEY = "__pregel_checkpointer"


# What the person's answer did, as the request log records it (`RequestObserver.decided`).
APPROVED, EDITED, INVALID_EDIT, REJECTED = "approved", "edited", "invalid_edit", "rejected"
ANSWERED, DECLINED, GRANTED, REFUSED = "answered", "declined", "granted", "refused"
DECISIONS = (APPROVED, EDITED, INVALID_EDIT, REJECTED, ANSWERED, DECLINED, GRANTED, REFUSED)
JUDGED = "judged"  # an agent's answer judged (see graph.closure): fulfilled or not, and why


class Asked(TypedDict):
    """A question a paused call asks: the interrupt's id and value (a `hitl.Question`, mostly)."""

    interrupt_id: str
    question: object


@dataclass(frozen=True)
class CallRecord:
    """One tool call as the request log sees it."""

    request_id: str
    parent_request_id: str | None
    session_id: str | None
    user_id: str | None
    tool: str
    action: str | None
    call_name: str
    parameters: dict[str, object]
    background: bool = False
    idempotent: bool = False


@dataclass(frozen=True)
class CallTask:
    """The LangGraph task a call ran in: its checkpoint writes, which follow, hold the result.

    `checkpointer` is the one its graph saves them with (None when not known).
    """

    thread_id: str
    task_id: str
    checkpointer: object = None

    @classmethod
    def of(cls, config: RunnableConfig | None) -> CallTask | None:
        """The task of a graph run's `config`; None outside one."""
        configurable = (config or {}).get("configurable", {})
        thread_id, task_id = configurable.get("thread_id"), configurable.get(TASK_ID_KEY)
        if isinstance(thread_id, str) and isinstance(task_id, str):
            return cls(thread_id, task_id, configurable.get(CHECKPOINTER_KEY))
        return None


class RequestObserver(Protocol):
    """Told how each tool call goes (the request log)."""

    async def started(self, call: CallRecord) -> bool:
        """Record a new call as running; False (nothing written) if the log knows it already."""
        ...

    async def acknowledged(self, call: CallRecord, *, detail: str) -> None: ...

    async def finished(self, call: CallRecord, result: ToolResult, *, task: CallTask | None = None) -> None:
        """It ended with `result`, which `task`'s checkpoint writes hold (when it ran in one)."""
        ...

    async def cancelled(self, call: CallRecord) -> None: ...

    async def paused(self, call: CallRecord, *, asked: Sequence[Asked] = ()) -> None:
        """It waits for answers to `asked` (its own questions; none when a call below it asks)."""
        ...

    async def resumed(self, call: CallRecord) -> None: ...

    async def prior(self, call: CallRecord) -> PriorCall | None: ...

    async def requeued(self, call: CallRecord) -> None: ...

    async def interrupted(self, call: CallRecord) -> None: ...

    async def used(self, record: UsageRecord, *, task: CallTask | None = None) -> None:
        """A model call's tokens and cost, or a tool call's billing, for the request log.

        `task`: the LangGraph task the model call was made in, whose writes may take it along.
        """
        ...

    async def decided(
        self,
        request_id: str,
        *,
        user_id: str | None,
        outcome: str,
        detail: Mapping[str, object],
        question: int = 0,
    ) -> None:
        """The person answered question number `question` (from 0) of the call `request_id`.

        `outcome` says how (approved, edited, rejected, answered, ...), `detail`
        what with. A task that runs again after a later question replays the
        earlier answers: a decision the log holds already is not recorded twice.
        """
        ...

    async def judged(
        self, request_id: str, *, user_id: str | None, verdict: Mapping[str, object]
    ) -> None:
        """A judge decided whether the agent's request `request_id` was fulfilled (`verdict`)."""
        ...


@dataclass(frozen=True)
class Handover:
    """A call going to the background before it started: what a worker needs to run it.

    The request log holds the call itself (`call`); `arguments` are those it
    runs with, the person's edit included, without the values its tool's
    configuration fixes (the worker adds its own); `agent_path` is the level
    it was made at; `max_retries` its folder's.
    """

    call: CallRecord
    tool: BaseTool
    arguments: dict[str, object]
    agent_path: tuple[str, ...] = ()
    max_retries: int = 0


class BackgroundRunner(Protocol):
    """Takes over calls that run in the background (the task manager, the job queue)."""

    async def defer(self, handover: Handover) -> bool:
        """Queue a call that has not started, to run elsewhere; False: it runs here (`adopt`)."""
        ...

    def adopt(
        self,
        work: asyncio.Task[ToolResult],
        call: CallRecord,
        *,
        observer: RequestObserver | None,
        started_at: datetime | None = None,
        handover: Handover | None = None,
    ) -> object:
        """Take over a call running in this process (begun at `started_at`); `handover` says
        how it could run elsewhere, should this process stop."""
        ...

    def running(self, request_id: str) -> bool:
        """Whether this process runs the call `request_id` in the background."""
        ...


async def safely(tracking: Awaitable[object]) -> None:
    """Run one request-log write; the log must never cost the user a tool result."""
    try:
        await tracking
    except Exception as error:
        # One line: SQLAlchemy's text holds the statement and its parameters.
        first = (str(error).strip().splitlines() or [""])[0]
        logger.warning("request tracking failed: %s: %s", type(error).__name__, first)
