"""Questions for the person: on the controlling terminal when there is one, as sudo asks.

With a terminal, the question is written to it and the answer read from it, so
piped standard input stays the chat's. Without one (a pipe, a cron job, CI),
answers are read from standard input, one line per question:

- `y`/`yes` approves, `n`/`no` denies; both are remembered. An empty line is no
  answer: the folder is not loaded now and is asked about again next time;
- `d` (for a changed folder) shows what changed, file by file, then asks again;
  `a` (for a folder shipped with the orchestrator, as shipped) approves it and
  every other shipped folder asked about after it;
- any other line is not an answer. For `chat`, whose messages come from the
  same input, the folder stays undecided (asked again next time), nothing more
  is asked, and the line is the chat's first message. For `ask`, which reads
  nothing else there, the question is asked again with the next line;
- end of input leaves the folder, and every one after it, undecided.

On a terminal an unclear answer is asked again, and Ctrl-C or Ctrl-D stops the
questions, leaving the folders undecided.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console

from orchestrator.folders.approvals import LATER, Later, Status
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.shipped import is_shipped
from orchestrator.terminal.folder_reach import describe_folder
from orchestrator.terminal.prompt_history import FolderHistory
from orchestrator.terminal.text import shown

# Or a descriptor of the terminal: a fork of the warm process has the command's
# (`orchestrator.warm.child`), /dev/tty being no terminal for a process outside its session.
TERMINAL: str | int = "/dev/tty"
YES = ("y", "yes")
NO = ("n", "no")
QUESTION = "Approve and load it? \\[y/N] "
NO_ANSWER = "(no answer: not loaded now, asked again next time)"
FIRST_USE = (
    "\n[yellow]First start:[/yellow] you are asked about each tool folder before any of its code "
    "runs, the example agents shipped with the orchestrator among them; at their questions, "
    "[bold]a[/bold] approves all the shipped folders, as shipped."
)
ALL_SHIPPED = "approved: shipped with the orchestrator, as shipped (a)"


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
        history: FolderHistory | None = None,
    ) -> None:
        self.history = history  # what changed folders held when approved, for `d`
        self.all_shipped = False  # `a` was answered
        self._told_first_use = False
        self.terminal = terminal.input if terminal else None
        self.stdin = stdin or sys.stdin
        self.keep_messages = keep_messages
        self.console = Console(file=terminal.output, highlight=False) if terminal else err
        self.leftover: list[str] = []

    def __call__(self, folder: ToolFolder, status: Status) -> bool | Later | None:
        heading = "Changed since you decided on it" if status == Status.CHANGED else "New tool folder"
        text = f"\n[yellow]{heading}:[/yellow] {describe_folder(folder)}"
        history = self.history if status == Status.CHANGED else None
        changes = history.changes(folder) if history is not None else None
        if changes is not None:
            text += "".join(f"\n  {shown(line)}" for line in changes.lines())
        if history is not None:
            text += "".join(f"\n  {shown(line)}" for line in history.remote_changes(folder))
        shipped = is_shipped(folder)
        if shipped and self.all_shipped:
            self.console.print(f"{text}\n{ALL_SHIPPED}")
            return True
        if shipped and self.history is not None and self.history.first_use:
            self._first_use()
        words = (("d",) if changes is not None else ()) + (("a",) if shipped else ())
        while True:
            answer = self.confirm(text, question=_question(words), words=words)
            if answer == "d" and history is not None and changes is not None:
                self._show_diff(history.diff(folder, changes))
                text = ""  # the question again, without the folder once more
                continue
            self.all_shipped = self.all_shipped or answer == "a"
            return True if answer == "a" else None if isinstance(answer, str) else answer

    def _show_diff(self, lines: list[str]) -> None:
        for line in lines:
            self.console.print(shown(line), highlight=False)

    def _first_use(self) -> None:
        if not self._told_first_use:
            self._told_first_use = True
            self.console.print(FIRST_USE)

    def confirm(
        self, text: str, *, question: str = QUESTION, words: tuple[str, ...] = ()
    ) -> bool | Later | str | None:
        """Show `text` (rich markup), then ask `question`.

        True for yes, False for no, LATER for an empty line, one of `words` as
        typed, None when the input ended.
        """
        if text:
            self.console.print(text)
        if self.terminal is not None:
            return self._ask_terminal(self.terminal, question, words)
        return self._ask_piped(question, words)

    def _ask_terminal(
        self, terminal: TextIO, question: str, words: tuple[str, ...]
    ) -> bool | Later | str | None:
        while True:
            self.console.print(question, end="")
            try:
                line = terminal.readline()
            except KeyboardInterrupt:  # the terminal has echoed ^C itself
                line = ""
            if not line or not line.endswith("\n"):
                self.console.print("\n(stopped: not approved; asked again next time)")
                return None
            answer = _read(line, words)
            if answer is not None:
                if answer is LATER:
                    self.console.print(NO_ANSWER)
                return answer
            self.console.print(f"Please answer {_choices(words)}, not '{shown(line.strip())}'.")

    def _ask_piped(self, question: str, words: tuple[str, ...]) -> bool | Later | str | None:
        while True:
            self.console.print(question, end="")
            line = self.stdin.readline()
            if not line:
                self.console.print("\n(end of input: not approved)")
                return None
            answer = line.strip()
            self.console.print(shown(answer))  # echo piped answers
            read = _read(line, words)
            if read is not None:
                if read is LATER:
                    self.console.print(NO_ANSWER)
                return read
            if self.keep_messages:
                self.leftover.append(line.rstrip("\n"))
                self.console.print(
                    "(not a y/n answer: not approved, asked again next time; "
                    "the line is kept as a message)"
                )
                return None
            self.console.print(f"Please answer {_choices(words)}, not '{shown(answer)}'.")


def _read(line: str, words: tuple[str, ...]) -> bool | Later | str | None:
    """The answer a line gives: yes, no, no answer (empty), one of `words`; None if unclear."""
    answer = line.strip().lower()
    if not answer:
        return LATER
    if answer in YES or answer in NO:
        return answer in YES
    return answer if answer in words else None


def _choices(words: tuple[str, ...]) -> str:
    return ", ".join(["y", "n", *words[:-1]]) + f" or {words[-1]}" if words else "y or n"


def _question(words: tuple[str, ...]) -> str:
    return QUESTION if not words else QUESTION.replace("y/N", "/".join(["y", "N", *words]))


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
        reader = open(_terminal(), encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:  # no controlling terminal (ENXIO), or not allowed
        yield None
        return
    with reader, open(_terminal(), "w", encoding="utf-8") as writer:
        yield Terminal(reader, writer)


def _terminal() -> str | int:
    return os.dup(TERMINAL) if isinstance(TERMINAL, int) else TERMINAL
