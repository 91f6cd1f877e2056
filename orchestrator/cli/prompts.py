"""Questions for the person: on the controlling terminal when there is one, as sudo asks.

With a terminal, the question is written to it and the answer read from it, so
piped standard input stays the chat's. Without one (a pipe, a cron job, CI),
answers are read from standard input, one line per question:

- `y`/`yes` approves, `n`/`no` or an empty line denies; both are remembered;
- any other line is not an answer. For `chat`, whose messages come from the
  same input, the folder stays undecided (asked again next time), nothing more
  is asked, and the line is the chat's first message. For `ask`, which reads
  nothing else there, the question is asked again with the next line;
- end of input leaves the folder, and every one after it, undecided.

On a terminal an unclear answer is asked again, and Ctrl-C or Ctrl-D stops the
questions, leaving the folders undecided.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console

from orchestrator.cli.common import describe_folder, shown
from orchestrator.tools.approval import Status
from orchestrator.tools.discovery import ToolFolder

TERMINAL = "/dev/tty"
YES = ("y", "yes")
NO = ("", "n", "no")
QUESTION = "Approve and load it? \\[y/N] "


class ApprovalPrompt:
    """Asks y/N about each new or changed tool folder (an `Ask` for `review`).

    With `keep_messages`, a piped line that is not an answer ends the questions
    and is kept in `leftover`, for the chat to send.
    """

    def __init__(
        self,
        *,
        err: Console,
        stdin: TextIO | None = None,
        terminal: Terminal | None = None,
        keep_messages: bool = False,
    ) -> None:
        self.terminal = terminal.input if terminal else None
        self.stdin = stdin or sys.stdin
        self.keep_messages = keep_messages
        self.console = Console(file=terminal.output, highlight=False) if terminal else err
        self.leftover: list[str] = []

    def __call__(self, folder: ToolFolder, status: Status) -> bool | None:
        heading = "Changed since you decided on it" if status == Status.CHANGED else "New tool folder"
        return self.confirm(f"\n[yellow]{heading}:[/yellow] {describe_folder(folder)}")

    def confirm(self, text: str, *, question: str = QUESTION) -> bool | None:
        """Show `text` (rich markup), then ask `question`: True for yes, None when input ended."""
        self.console.print(text)
        if self.terminal is not None:
            return self._ask_terminal(self.terminal, question)
        return self._ask_piped(question)

    def _ask_terminal(self, terminal: TextIO, question: str) -> bool | None:
        while True:
            self.console.print(question, end="")
            try:
                line = terminal.readline()
            except KeyboardInterrupt:  # the terminal has echoed ^C itself
                line = ""
            if not line or not line.endswith("\n"):
                self.console.print("\n(stopped: not approved; asked again next time)")
                return None
            answer = line.strip().lower()
            if answer in YES or answer in NO:
                return answer in YES
            self.console.print(f"Please answer y or n, not '{shown(line.strip())}'.")

    def _ask_piped(self, question: str) -> bool | None:
        while True:
            self.console.print(question, end="")
            line = self.stdin.readline()
            if not line:
                self.console.print("\n(end of input: not approved)")
                return None
            answer = line.strip()
            self.console.print(shown(answer))  # echo piped answers
            if answer.lower() in YES or answer.lower() in NO:
                return answer.lower() in YES
            if self.keep_messages:
                self.leftover.append(line.rstrip("\n"))
                self.console.print(
                    "(not a y/n answer: not approved, asked again next time; "
                    "the line is kept as a message)"
                )
                return None
            self.console.print(f"Please answer y or n, not '{shown(answer)}'.")


@dataclass(frozen=True)
class Terminal:
    """The controlling terminal, opened once to read and once to write.

    One text file opened "r+" would write its read-ahead back to the screen.
    """

    input: TextIO
    output: TextIO


@contextmanager
def person_terminal() -> Iterator[Terminal | None]:
    """The controlling terminal, open for questions; None when the process has none."""
    try:
        reader = open(TERMINAL, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:  # no controlling terminal (ENXIO), or not allowed
        yield None
        return
    with reader, open(TERMINAL, "w", encoding="utf-8") as writer:
        yield Terminal(reader, writer)
