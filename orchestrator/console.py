"""Terminal input and output: live turn progress, streamed answers, stdin lines."""

from __future__ import annotations

import asyncio
import queue
import threading

from rich.console import Console
from rich.status import Status

from orchestrator.events import Stage, ToolPhase
from orchestrator.session import TurnEvent, TurnResult

STAGE_TEXT = {
    Stage.SUBMITTED: "submitted",
    Stage.STREAMING: "thinking…",
    Stage.EXECUTING: "running tools…",
    Stage.PROCESSING: "reading tool results…",
    Stage.COMPLETE: "done",
    Stage.ERROR: "failed",
}


class TurnRenderer:
    """Shows one turn: a spinner with stages and tools on a terminal, tool lines otherwise.

    Answers go to `out` (stdout); everything else goes to `err` (stderr).
    """

    def __init__(self, *, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self.streamed: set[str | None] = set()
        self._status: Status | None = err.status("submitted") if err.is_terminal else None
        if self._status is not None:
            self._status.start()

    def __call__(self, event: TurnEvent) -> None:
        if event["kind"] == "token":
            self._stop_status()
            if self.streamed and event["message_id"] not in self.streamed:
                self.out.print()  # a new reply after text that came with tool calls
            self.streamed.add(event["message_id"])
            self.out.print(event["text"], end="", markup=False, highlight=False, soft_wrap=True)
        elif event["kind"] == "status":
            self._show(STAGE_TEXT[event["stage"]])
        elif self._status is not None:
            self._show(f"{event['tool']} ({event['index']}/{event['total']}): {event['phase']}")
        elif event["phase"] == ToolPhase.COMPLETED:
            self.err.print(
                f"  [dim]tool {event['tool']} ({event['index']}/{event['total']}): "
                f"{event['status']}[/dim]"
            )

    def finish(self, result: TurnResult) -> None:
        """End the turn's output, printing the answer if it was not streamed."""
        self._stop_status()
        if result.answer_id not in self.streamed:
            if self.streamed:
                self.out.print()
            self.out.print(result.answer, end="", markup=False, highlight=False, soft_wrap=True)
        self.out.print()

    def fail(self, message: str) -> None:
        """End the turn with a one-line error."""
        self._stop_status()
        if self.streamed:
            self.out.print()
        self.err.print(f"[red]error:[/red] {message}", markup=True, highlight=False)

    def _show(self, text: str) -> None:
        if self._status is not None:
            self._status.update(f"[dim]{text}[/dim]")
            self._status.start()

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()


class LineReader:
    """Reads stdin lines on a daemon thread, so a pending read never blocks exit."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[tuple[str, asyncio.Future[str | None]]] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._serve, name="stdin", daemon=True).start()

    async def readline(self, prompt: str = "") -> str | None:
        """The next line without its newline, or None at end of input."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._requests.put((prompt, future))
        return await future

    def _serve(self) -> None:
        while True:
            prompt, future = self._requests.get()
            try:
                line: str | None = input(prompt)
            except EOFError:
                line = None
            future.get_loop().call_soon_threadsafe(_resolve, future, line)


def _resolve(future: asyncio.Future[str | None], line: str | None) -> None:
    if not future.done():
        future.set_result(line)
