"""Signals as orderly cancellation: nothing is left running, the database is left cleanly.

Ctrl-C (SIGINT) cancels the turn that is running, if one is; otherwise, like
SIGTERM and SIGHUP (a closed terminal, `kill`, `timeout`), it cancels the whole
command, whose cleanup then runs as on a normal exit. A signal that comes while
that cleanup runs is ignored, so the cleanup itself is never cut short.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """Routes the process's signals to the running turn or to the command itself."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None  # the signal that ended the command
        self._main: asyncio.Task[object] | None = None
        self._turn: asyncio.Task[object] | None = None

    @property
    def exit_code(self) -> int:
        """The shell's convention for a command ended by a signal: 128 + its number."""
        return 128 + int(self.received) if self.received is not None else 0

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Handle the signals on the running loop for the current task's lifetime."""
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach only the main thread (a command run from a test, say)
            return
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        for number in HANDLED:
            loop.add_signal_handler(number, self._received, number)
        try:
            yield
        finally:
            for number in HANDLED:
                loop.remove_signal_handler(number)
            ignore_exit_signals()  # the rest of the exit must not be cut short either

    @contextmanager
    def turn(self, task: asyncio.Task[object]) -> Iterator[None]:
        """While `task` runs, Ctrl-C cancels it instead of the command."""
        self._turn = task
        try:
            yield
        finally:
            self._turn = None

    @contextmanager
    def while_closing(self, *, stop: Callable[[], None]) -> Iterator[None]:
        """While the command's cleanup waits for work that outlives its turn (background jobs
        running in this process): Ctrl-C or SIGTERM calls `stop`, a closed terminal (SIGHUP)
        changes nothing, so the work goes on without it."""
        if threading.current_thread() is not threading.main_thread() or self._main is None:
            yield  # signals reach only the main thread, while the handlers are installed
            return
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stop)
        loop.add_signal_handler(signal.SIGTERM, stop)
        loop.add_signal_handler(signal.SIGHUP, _nothing)
        try:
            yield
        finally:
            for number in HANDLED:
                loop.add_signal_handler(number, self._received, number)

    def _received(self, number: signal.Signals) -> None:
        if self.received is not None:
            return  # already ending: let the cleanup finish
        if number == signal.SIGINT and self._turn is not None and not self._turn.done():
            if not self._turn.cancelling():  # a second Ctrl-C must not cut its cleanup short
                self._turn.cancel()
            return
        self.received = signal.Signals(number)
        if self._main is not None:
            self._main.cancel()


def _nothing() -> None:
    return None


def exit_on_signals() -> None:
    """Before the event loop runs: SIGTERM and SIGHUP exit like Ctrl-C, running atexit hooks."""
    if threading.current_thread() is not threading.main_thread():
        return
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _raise_exit)


def ignore_exit_signals() -> None:
    """From here on the process is exiting in order; further signals would only cut that short."""
    for number in HANDLED:
        signal.signal(number, signal.SIG_IGN)


def _raise_exit(number: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + number)
