"""A job's result into its session: at once while the session is open somewhere, else when it opens.

The database tells whoever listens on `orchestrator_job_ended` that a job of
some session ended (migration 9: the notice holds a digest of the session id,
nothing else). A process that has the session open claims the result
(`delivered_at`: one process only) and hands it to the session, whose
follow-up turn reports it, as for a call run here. A session opened later
finds what ended while no one had it open (`catch_up`): "while you were away".

No procrastinate here: listening needs psycopg alone, on the application's login.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass

import psycopg

from orchestrator.conversation.job_board import BackgroundJob, Delivery, Listener
from orchestrator.dispatch.replay import recorded_outcome
from orchestrator.store.engine import Database
from orchestrator.store.job_requests import JobRequests, UndeliveredJob
from orchestrator.store.pool import CONNECT_ARGS
from orchestrator.tools.request_log import CallRecord, PriorCall
from orchestrator.tools.request_status import RequestStatus

logger = logging.getLogger(__name__)

CHANNEL = "orchestrator_job_ended"
RECONNECT_SECONDS = 1.0  # after the database went away, listen again this much later
LISTEN_WAIT_SECONDS = 5.0  # how long a caller waits for listening to begin


def session_digest(session_id: str) -> str:
    """What the database's notice says of a session (see migration 9)."""
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass
class _Watched:
    """An open session: whose it is, and where its results go."""

    session_id: str
    user_id: str
    delivery: Delivery | None
    lock: asyncio.Lock  # one delivery round at a time: follow-up turns in order


class Deliveries:
    """The results of jobs of this process's open sessions, delivered once each.

    `listeners` are told of each result this process claims, before its
    session gets it. `expect` and `wait` let `ask` wait for the jobs it started,
    wherever their results are delivered.
    """

    def __init__(self, database: Database, *, listeners: list[Listener]) -> None:
        self.database = database
        self.jobs = JobRequests(database)
        self.listeners = listeners
        self._watched: dict[str, _Watched] = {}  # by session digest
        self._expected: dict[str, tuple[str, asyncio.Event]] = {}  # request id -> session, delivered
        self._listening: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._rounds: set[asyncio.Task[None]] = set()
        self._closed = False  # closing: results wait in the database for the session's next opening

    def watch(self, session_id: str, *, user_id: str, delivery: Delivery | None = None) -> None:
        """Deliver the results of the session's jobs to `delivery` while this process has it open."""
        digest = session_digest(session_id)
        known = self._watched.get(digest)
        if known is None:
            self._watched[digest] = _Watched(session_id, user_id, delivery, asyncio.Lock())
        elif delivery is not None:
            known.delivery = delivery

    async def listen(self) -> None:
        """Listen for ended jobs (once); returns when listening, or after LISTEN_WAIT_SECONDS
        (the database away: listening begins when it is back, and catches up then).
        Nothing once closed: what ends from then on is delivered when its session next opens."""
        if self._closed:
            return
        if self._listening is None:
            self._listening = _task(self._listen(), name="job results")
        ready = asyncio.ensure_future(self._ready.wait())
        await asyncio.wait(
            {ready, self._listening}, timeout=LISTEN_WAIT_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        ready.cancel()

    def expect(self, request_id: str, *, session_id: str) -> None:
        """A job of the session this process started, to wait for (`wait`)."""
        self._expected.setdefault(request_id, (session_id, asyncio.Event()))

    def expected(self, session_id: str) -> list[str]:
        """The jobs of the session this process started, not delivered yet."""
        return [
            rid for rid, (sid, event) in self._expected.items() if sid == session_id and not event.is_set()
        ]

    async def wait(self, request_ids: list[str]) -> None:
        """Until each of `request_ids` ended and reached its session (here or elsewhere)."""
        events = [self._expected[rid][1].wait() for rid in request_ids if rid in self._expected]
        if events:
            await asyncio.gather(*events)

    async def catch_up(self, session_id: str, *, user_id: str) -> list[BackgroundJob]:
        """Claim what ended while the session was not open; start listening if jobs still run."""
        self.watch(session_id, user_id=user_id)
        waiting = await self.jobs.undelivered(session_id, user_id=user_id)
        if any(job.outcome is None for job in waiting):
            await self.listen()
        claimed = [task for task in [await self._claim(job, session_id, user_id) for job in waiting] if task]
        for task in claimed:  # the caller reports them now
            self._delivered(task.job_id)
        return claimed

    async def deliver(self, session_id: str) -> None:
        """Claim and hand over to the session whatever of its jobs ended (one round)."""
        watched = self._watched.get(session_digest(session_id))
        if watched is None or self._closed:
            return
        async with watched.lock:
            waiting = await self.jobs.undelivered(session_id, user_id=watched.user_id)
            for job in waiting:
                task = await self._claim(job, session_id, watched.user_id)
                if task is None:
                    continue
                for listener in self.listeners:
                    listener(task)
                if watched.delivery is not None:
                    try:
                        await watched.delivery(task)
                    except Exception as error:  # a report that fails must not stop the others
                        logger.warning("delivering job %s failed: %s", task.job_id, error)
                self._delivered(task.job_id)  # reported: whoever waits for it may go on
            await self._settle_expected(session_id, watched.user_id, waiting)

    async def close(self) -> None:
        """Stop delivering: this process's sessions are closing."""
        self._closed = True
        if self._listening is not None:
            self._listening.cancel()
            await asyncio.gather(self._listening, return_exceptions=True)
        for round_ in list(self._rounds):
            round_.cancel()
        if self._rounds:
            await asyncio.gather(*self._rounds, return_exceptions=True)

    async def _claim(self, job: UndeliveredJob, session_id: str, user_id: str) -> BackgroundJob | None:
        if job.outcome is None or not await self.jobs.claim_delivery(job.request_id, user_id=user_id):
            return None
        return ended_task(job, session_id=session_id, user_id=user_id)

    async def _settle_expected(self, session_id: str, user_id: str, seen: list[UndeliveredJob]) -> None:
        """Jobs this process waits for that another process delivered are done here too."""
        mine = self.expected(session_id)
        if not mine:
            return
        still = {job.request_id for job in seen if job.outcome is None}
        calls = await self.jobs.background_calls(user_id=user_id, session_id=session_id)
        for call in calls:
            if call.request_id in mine and call.request_id not in still and call.delivered:
                self._delivered(call.request_id)

    def _delivered(self, request_id: str) -> None:
        expected = self._expected.get(request_id)
        if expected is not None:
            expected[1].set()

    async def _listen(self) -> None:
        url = self.database.app_libpq_url
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    url, autocommit=True, connect_timeout=CONNECT_ARGS["connect_timeout"]
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    for watched in list(self._watched.values()):  # what ended before this
                        self._round(watched.session_id)
                    async for notice in connection.notifies():
                        watched = self._watched.get(notice.payload)
                        if watched is not None:
                            self._round(watched.session_id)
            except psycopg.OperationalError as error:  # the database went away: listen again
                logger.info("listening for job results: %s; again in %.0f s", error, RECONNECT_SECONDS)
                await asyncio.sleep(RECONNECT_SECONDS)

    def _round(self, session_id: str) -> None:
        round_ = _task(self._safe_round(session_id), name=f"deliver {session_id}")
        self._rounds.add(round_)
        round_.add_done_callback(self._rounds.discard)

    async def _safe_round(self, session_id: str) -> None:
        try:
            await self.deliver(session_id)
        except Exception as error:  # the database may be away a moment: the next notice retries
            logger.warning("delivering job results failed: %s: %s", type(error).__name__, error)


def ended_task(job: UndeliveredJob, *, session_id: str, user_id: str) -> BackgroundJob:
    """The ended job as the session's follow-up turn and the chat's lines take it."""
    assert job.outcome is not None
    call = CallRecord(
        request_id=job.request_id,
        parent_request_id=None,
        session_id=session_id,
        user_id=user_id,
        tool=job.call_name,
        action=None,
        call_name=job.call_name,
        parameters={},
        background=True,
    )
    prior = PriorCall(status=job.outcome, outcome=job.outcome, body=job.body, owner_alive=False, ours=False)
    status = "completed" if job.outcome == RequestStatus.COMPLETED else "failed"
    return BackgroundJob(
        call=call,
        work=None,
        status=status,
        result=recorded_outcome(prior),
        started_at=job.started_at,
        finished_at=job.updated_at,
    )


def _task(coroutine: Coroutine[object, object, None], *, name: str) -> asyncio.Task[None]:
    # A fresh context: a follow-up turn must not run as part of the graph run that started the job.
    return asyncio.get_running_loop().create_task(
        coroutine, name=name, context=contextvars.Context()
    )

