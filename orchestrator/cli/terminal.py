"""Where chat lines come from: a line editor on a terminal, plain lines from a pipe."""

from __future__ import annotations

import asyncio
import os
import queue
import sys
import termios
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout

PROMPT = "you> "


class LineSource(Protocol):
    """The person's next line; None at end of input. KeyboardInterrupt: Ctrl-C at the prompt."""

    async def readline(self) -> str | None: ...


class PipedLines:
    """Lines of a non-terminal stdin, read on a daemon thread so a pending read never blocks exit.

    `first` lines are given out before stdin is read (a line the approval prompt kept).
    """

    def __init__(self, *, first: Iterable[str] = ()) -> None:
        self._first = list(first)
        self._requests: queue.SimpleQueue[asyncio.Future[str | None]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="stdin", daemon=True).start()

    async def readline(self) -> str | None:
        if self._first:
            return self._first.pop(0)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._requests.put(future)
        return await future

    def _serve(self) -> None:
        while True:
            future = self._requests.get()
            line: str | None = sys.stdin.readline()
            line = line.removesuffix("\n") if line else None
            future.get_loop().call_soon_threadsafe(_resolve, future, line)


def _resolve(future: asyncio.Future[str | None], line: str | None) -> None:
    if not future.done():
        future.set_result(line)


class TerminalLines:
    """prompt_toolkit's line editor: history in the data directory, Ctrl-R search,
    multi-line paste, completion of slash commands. Output printed while it waits
    (a background task's report) appears above the prompt without breaking the line.
    """

    def __init__(self, *, history: Path, commands: Iterable[str]) -> None:
        history.parent.mkdir(parents=True, exist_ok=True)
        # Every line typed is kept there: for this OS user's eyes only.
        os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        history.chmod(0o600)
        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=_SlashCommands(sorted(commands)),
            key_bindings=_bindings(),
        )

    async def readline(self) -> str | None:
        with patch_stdout(raw=True):
            try:
                # The command owns SIGINT (Ctrl-C cancels a turn): prompt_toolkit must
                # not install, then remove, a handler of its own.
                return await self.session.prompt_async(PROMPT, handle_sigint=False)
            except EOFError:
                return None


def _bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        # Ctrl-C clears what was typed; at an empty prompt it is the REPL's to judge.
        buffer = event.app.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return bindings


class _SlashCommands(Completer):
    """Completes `/` commands at the start of the line."""

    def __init__(self, commands: list[str]) -> None:
        self.commands = commands

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for command in self.commands:
                if command.startswith(text):
                    yield Completion(command, start_position=-len(text))


@contextmanager
def quiet_keyboard() -> Iterator[None]:
    """While a turn runs, keys typed are not echoed into its output (they wait for the prompt)."""
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    if fd is None:
        yield
        return
    before = termios.tcgetattr(fd)
    quiet = list(before)
    quiet[3] &= ~termios.ECHO
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, before)
