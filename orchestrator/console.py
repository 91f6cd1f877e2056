"""Terminal input and output: live turn progress, streamed answers, stdin lines."""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from orchestrator.events import Stage, ToolPhase
from orchestrator.session import TurnEvent, TurnResult
from orchestrator.tools.approval import Status as ApprovalStatus
from orchestrator.tools.discovery import ToolFolder

STAGE_TEXT = {
    Stage.SUBMITTED: "submitted",
    Stage.STREAMING: "thinking…",
    Stage.EXECUTING: "running tools…",
    Stage.PROCESSING: "reading tool results…",
    Stage.COMPLETE: "done",
    Stage.ERROR: "failed",
}


class TurnRenderer:
    """Shows one turn: a line per finished tool call, and on a terminal a live spinner.

    Answers go to `out` (stdout); everything else goes to `err` (stderr). The
    spinner only ever runs on a line of its own: it is stopped while text streams.
    """

    def __init__(self, *, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self.streamed: set[str | None] = set()
        self._mid_line = False
        self._status: Status | None = err.status("") if err.is_terminal else None
        self._show(STAGE_TEXT[Stage.SUBMITTED])

    def __call__(self, event: TurnEvent) -> None:
        if event["kind"] == "token":
            self._token(event["text"], event["message_id"])
        elif event["kind"] == "status":
            if event["stage"] in (Stage.COMPLETE, Stage.ERROR):
                self._stop_status()
            else:
                self._show(STAGE_TEXT[event["stage"]])
        else:
            position = f"{event['tool']} ({event['index']}/{event['total']})"
            if event["phase"] == ToolPhase.COMPLETED:
                self._end_line()
                indent = "  " * (event["depth"] + 1)
                self.err.print(f"{indent}[dim]tool {escape(position)}: {event['status']}[/dim]")
            self._show(f"{position}: {event['phase']}")

    def finish(self, result: TurnResult) -> None:
        """End the turn's output, printing the answer if it was not streamed."""
        self._stop_status()
        if result.answer_id not in self.streamed:
            self._end_line()
            self._write(result.answer)
        self._end_line()

    def fail(self, message: str) -> None:
        """End the turn with a one-line error."""
        self._stop_status()
        self._end_line()
        self.err.print(f"[red]error:[/red] {escape(message)}", highlight=False)

    def _token(self, text: str, message_id: str | None) -> None:
        self._stop_status()
        if self.streamed and message_id not in self.streamed:
            self._end_line()  # a new reply after text that came with tool calls
        self.streamed.add(message_id)
        self._write(text)

    def _write(self, text: str) -> None:
        self.out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        self._mid_line = self._mid_line or bool(text)

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.print()
            self._mid_line = False

    def _show(self, text: str) -> None:
        if self._status is None:
            return
        self._end_line()
        self._status.update(f"[dim]{escape(text)}[/dim]")
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


def describe_folder(folder: ToolFolder) -> str:
    """Name, version, description, capabilities and path of a tool folder (rich markup)."""
    capabilities = ", ".join(folder.config.capabilities) or "none declared"
    return (
        f"[bold]{escape(folder.name)}[/bold] {escape(folder.config.version)}\n"
        f"  {escape(folder.config.description)}\n"
        f"  capabilities: {escape(capabilities)}\n"
        f"  path: {escape(display_path(folder.path))}"
    )


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


class ApprovalPrompt:
    """Asks y/N about a tool folder on stderr and reads the answer from stdin (any stdin)."""

    def __init__(self, *, err: Console, stdin: TextIO | None = None) -> None:
        self.err = err
        self.stdin = stdin or sys.stdin

    def __call__(self, folder: ToolFolder, status: ApprovalStatus) -> bool | None:
        heading = "Changed since you decided on it" if status == ApprovalStatus.CHANGED else "New tool folder"
        self.err.print(f"\n[yellow]{heading}:[/yellow] {describe_folder(folder)}", highlight=False)
        while True:
            self.err.print("Approve and load it? \\[y/N] ", end="")
            line = self.stdin.readline()
            if line and not self.stdin.isatty():
                self.err.print(line.strip(), markup=False, highlight=False)  # echo piped answers
            if not line:
                self.err.print("\n(end of input: not approved)")
                return None
            answer = line.strip().lower()
            if answer in ("y", "yes"):
                return True
            if answer in ("", "n", "no"):
                return False
            self.err.print(f"Please answer y or n, not {line.strip()!r}.", markup=False)
