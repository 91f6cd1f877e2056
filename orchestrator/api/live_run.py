"""A run while its server holds it: the events it made so far, for every client that follows it.

The first client streams it as it goes; `join` and a reconnect (`Last-Event-ID`)
read the same events from where they left, and wait for the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from langgraph.types import Interrupt, StreamPart

from orchestrator.api.stream_events import Event, EventStream
from orchestrator.store.runs import RunRow, RunStatus

END: Event = ("end", None)


class LiveRun:
    """One run of a thread in this server: its row, the events it streamed, its task."""

    def __init__(self, row: RunRow, stream: EventStream) -> None:
        self.row = row
        self.stream = stream
        self.events: list[Event] = [("metadata", {"run_id": row.run_id, "attempt": 1})]
        self.status: RunStatus = row.status
        self.task: asyncio.Task[None] | None = None
        # The top-level state the run's stream last showed, and its interrupts: what `wait`
        # and `join` answer with, read from no checkpoint.
        self.values: dict[str, object] | None = None
        self.interrupts: Sequence[Interrupt] = ()
        self._more = asyncio.Event()  # set, and replaced, at each new event

    @property
    def run_id(self) -> str:
        return self.row.run_id

    @property
    def done(self) -> bool:
        return bool(self.events) and self.events[-1] is END

    def part(self, part: StreamPart) -> None:
        """A part of the graph's stream: the events it makes for this run's client."""
        if part["type"] == "values":
            self.values, self.interrupts = dict(part["data"]), part["interrupts"]
        for event in self.stream.events(part):
            self.emit(event)

    def emit(self, event: Event) -> None:
        """Add one event for the run's followers."""
        if self.done:
            return
        self.events.append(event)
        self._more.set()
        self._more = asyncio.Event()

    def finish(self, status: RunStatus) -> None:
        """The run ended: its status, and the stream's `end`."""
        self.status = status
        self.emit(END)

    async def follow(self, *, after: int = -1) -> AsyncIterator[tuple[int, Event]]:
        """Each event with its index, from the one after `after`, until the run's end."""
        index = after + 1
        while True:
            while index < len(self.events):
                yield index, self.events[index]
                index += 1
            if self.done:
                return
            await self._more.wait()

    async def ended(self) -> RunStatus:
        """Wait for the run's end (not cancelling it if the waiter is cancelled); its status."""
        if self.task is not None:
            await asyncio.wait({self.task})  # never raises the task's own end (a cancel)
        return self.status
