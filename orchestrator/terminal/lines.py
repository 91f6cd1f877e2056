"""Where chat lines and answers come from: a line editor on a terminal, plain lines from a pipe."""

from __future__ import annotations

import asyncio
import os
import sys
import termios
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import create_input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import create_output
from prompt_toolkit.patch_stdout import patch_stdout

if TYPE_CHECKING:
    from orchestrator.terminal.tty_questions import Terminal

PROMPT = "you> "


class LineSource(Protocol):
    """The person's next line; None at end of input. KeyboardInterrupt: Ctrl-C at the prompt.

    `prompt` is shown before the line on a terminal; `default` is text the line
    starts with there, to edit (a pipe has neither).
    """

    async def readline(self, *, prompt: str = PROMPT, default: str = "") -> str | None: ...


class PipedLines:
    """Lines of a non-terminal stdin, read on a daemon thread so a pending read never blocks exit.

    `first` lines are given out before stdin is read (a line the approval prompt kept).
    A line read for a reader that stopped waiting (a cancelled question) goes to
    the next one: no line is lost.
    """

    def __init__(self, *, first: Iterable[str] = ()) -> None:
        self._lines: deque[str] = deque(first)
        self._ended = False
        self._waiting: deque[asyncio.Future[str | None]] = deque()
        self._wanted = threading.Semaphore(0)  # lines the thread may read ahead
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, name="stdin", daemon=True)

    async def readline(self, *, prompt: str = PROMPT, default: str = "") -> str | None:
        if self._lines:
            return self._lines.popleft()
        if self._ended:
            return None
        self._loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = self._loop.create_future()
        self._waiting.append(future)
        # Not is_alive(): a thread that just read end of input is dead before its
        # None reaches the loop, and that None will answer this reader.
        if self._thread.ident is None:
            self._thread.start()
        self._wanted.release()
        return await future

    def _serve(self) -> None:
        while True:
            self._wanted.acquire()
            line: str | None = sys.stdin.readline()
            line = line.removesuffix("\n") if line else None
            assert self._loop is not None  # set before the read was wanted
            self._loop.call_soon_threadsafe(self._arrived, line)
            if line is None:
                return

    def _arrived(self, line: str | None) -> None:
        """On the loop: give `line` to the oldest reader still waiting, else keep it."""
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_result(line)
                if line is not None:
                    return
        if line is None:
            self._ended = True
        else:
            self._lines.append(line)


class TerminalLines:
    """prompt_toolkit's line editor: history in the data directory, Ctrl-R search,
    multi-line paste, completion of slash commands. Output printed while it waits
    (a background job's report) appears above the prompt without breaking the line.

    Without `history`, lines are remembered for this process only (answers to
    questions: never written down). With `terminal`, it reads and writes that
    terminal (the controlling one) instead of stdin and stdout.
    """

    def __init__(
        self,
        *,
        history: Path | None,
        commands: Iterable[str] = (),
        terminal: Terminal | None = None,
    ) -> None:
        remembered: History = InMemoryHistory()
        if history is not None:
            history.parent.mkdir(parents=True, exist_ok=True)
            # Every line typed is kept there: for this OS user's eyes only.
            os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
            history.chmod(0o600)
            remembered = FileHistory(str(history))
        # Printed output goes above the prompt only when the prompt is on stdout's terminal.
        self._patch_stdout = terminal is None
        names = sorted(commands)
        self.session: PromptSession[str] = PromptSession(
            history=remembered,
            completer=_SlashCommands(names) if names else None,
            reserve_space_for_menu=8 if names else 0,  # no menu: no blank lines under the prompt
            key_bindings=_bindings(names),
            input=create_input(terminal.input) if terminal is not None else None,
            output=create_output(terminal.output) if terminal is not None else None,
        )

    async def readline(self, *, prompt: str = PROMPT, default: str = "") -> str | None:
        with patch_stdout(raw=True) if self._patch_stdout else nullcontext():
            try:
                # The command owns SIGINT (Ctrl-C cancels a turn): prompt_toolkit must
                # not install, then remove, a handler of its own.
                return await self.session.prompt_async(prompt, default=default, handle_sigint=False)
            except EOFError:
                return None


def _bindings(commands: list[str]) -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("tab")
    def _complete(event: KeyPressEvent) -> None:
        # A unique command is completed at once, not by a menu filled in the background:
        # an Enter typed right after the Tab then sends the whole command.
        buffer = event.app.current_buffer
        text = buffer.document.text_before_cursor
        found = _SlashCommands.matching(commands, text)
        if len(found) == 1 and not buffer.complete_state:
            buffer.insert_text(found[0][len(text) :])
        elif buffer.complete_state:
            buffer.complete_next()
        else:
            buffer.start_completion(insert_common_part=True)

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

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        for command in self.matching(self.commands, text):
            yield Completion(command, start_position=-len(text))

    @staticmethod
    def matching(commands: list[str], text: str) -> list[str]:
        """The commands `text` (the line so far) is the start of."""
        if not text.startswith("/") or " " in text:
            return []
        return [command for command in commands if command.startswith(text)]


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
