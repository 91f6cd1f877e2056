"""Running a session's turn: the graph streamed, its events forwarded, where it left the turn.

The caller holds the turn (see `session.Session`). A cancelled turn leaves a
valid history; a failed one keeps the user's message, and a model's failure
comes out explained; with storage, each step is saved before the next starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Unpack

from langchain_core.messages import BaseMessage
from langgraph.types import Command, StateSnapshot, ValuesStreamPart

from orchestrator.conversation.archive import Archive
from orchestrator.conversation.cancelled import close_cancelled_turn, unanswered_calls
from orchestrator.conversation.held_text import HeldText
from orchestrator.conversation.stream_read import stream_modes, turn_event
from orchestrator.conversation.thread import Thread
from orchestrator.conversation.turns import (
    AnsweredQuestion,
    PendingQuestion,
    TurnResult,
    Watchers,
    collect_turn,
    messages_of,
    questions_of,
    turn_plan,
)
from orchestrator.graph.state import OrchestratorState, Summary
from orchestrator.notes import turn_start
from orchestrator.plans import Plan
from orchestrator.tracing.spans import span


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


class TurnRunner:
    """Runs the session's graph for a turn and reads its stream; the turn's span and window."""

    def __init__(self, thread: Thread, archive: Archive) -> None:
        self._thread = thread
        self._archive = archive
        self._turns = 0  # turns this session object ran (the turn span's number)
        self.last_turn: TurnWindow | None = None  # the last turn it ran (`/trace`)

    async def stream(
        self,
        turn_input: OrchestratorState | Command[str] | None,
        *,
        lookup: asyncio.Future[str] | None = None,
        **watchers: Unpack[Watchers],
    ) -> Outcome:
        """Run the graph, forwarding its events (`on_part`: every part of the top-level graph's
        stream); where it left the turn, its history archived."""
        on_event, on_part = watchers.get("on_event"), watchers.get("on_part")
        thread = self._thread
        held = HeldText() if thread.settings.text_tool_calls else None
        last: ValuesStreamPart[OrchestratorState] | None = None  # the run's last top-level state
        interrupted = False
        try:
            async for part in thread.graph.astream(
                turn_input,
                thread.config,
                context=replace(thread.context, lookup=lookup),
                stream_mode=stream_modes(on_event=on_event, on_part=on_part),
                subgraphs=True,
                # With storage, each step is saved before the next starts: a killed
                # process resumes from the last one.
                durability="sync" if thread.storage is not None else "async",
                version="v2",
            ):
                if on_part is not None and not part["ns"]:
                    on_part(part)
                if part["type"] == "values":
                    if not part["ns"]:  # as LangGraph's `ainvoke` reads a run
                        last, interrupted = part, interrupted or bool(part["interrupts"])
                    continue
                event = turn_event(part)
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
                await self._archive.update()
            # Imported only now: the OpenAI client it knows costs a second to import.
            from orchestrator.llm.model_errors import explain_model_error

            explained = explain_model_error(error, settings=thread.settings)
            if explained is None:
                raise
            raise explained from error
        finally:
            await asyncio.shield(self._drop_off())
        messages: list[BaseMessage] = []
        if last is not None:
            messages = list(last["data"].get("messages", []))
        if last is None or interrupted or unanswered_calls(messages):
            # Paused, or ended unlike a finished turn: the state as the checkpoint has it.
            return Outcome.of(await self._archive.update())
        await self._archive.store(messages)
        summary = last["data"].get("summary")
        await self._archive.forget_summarised(messages, summary)
        return Outcome(messages, [], summary, last["data"].get("plan"))

    async def _drop_off(self) -> None:
        """Calls' ends that waited for their task's checkpoint writes, which never came."""
        if (pooled := self._thread.pooled) is not None:
            await pooled.drop_off(self._thread.session_id)

    async def _after_cancel(self) -> None:
        try:
            await close_cancelled_turn(self._thread)
        finally:
            await self._archive.update()

    @asynccontextmanager
    async def traced(self, turn_id: str | None, *, kind: str = "turn") -> AsyncIterator[None]:
        """The turn's span, when tracing is on (its model and tool calls are below it); its window."""
        self._turns += 1
        attributes = {
            "orchestrator.session_id": self._thread.session_id,
            "enduser.id": self._thread.user_id,
            "orchestrator.turn_id": turn_id,
            "orchestrator.turn": self._turns,
        }
        began = datetime.now(UTC)
        try:
            with span(kind, attributes):
                yield
        finally:
            self.last_turn = TurnWindow(turn_id or "", began, datetime.now(UTC))

    def result(
        self, outcome: Outcome, *, answered: list[AnsweredQuestion], start: str | None = None
    ) -> TurnResult:
        """The turn that began with message `start` (default: the last one a turn begins with)."""
        start = start or turn_start(outcome.messages)
        turn = collect_turn(outcome.messages, after=start, waiting=outcome.waiting)
        usage = self._thread.usage
        return replace(
            turn,
            answered=list(answered),
            usage=usage.turn,
            budget_stop=usage.stop,
            compacted=_compacted(outcome.summary, start=start),
            plan=turn_plan(outcome.plan, start=start),
        )


def _compacted(summary: Summary | None, *, start: str | None) -> dict[str, object] | None:
    """What the turn that began with message `start` compacted, if it did."""
    if not summary or start is None or summary.get("turn") != start:
        return None
    return {"saved_tokens": summary.get("saved", 0), "failed": bool(summary.get("failed"))}
