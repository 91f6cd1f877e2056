"""A folder's child process's standard input and output, usable from any thread's event loop.

A call is written from the caller's own loop and its answer read on that loop:
each hop between threads costs a wake-up (of a sleeping CPU, on a small
machine, and then the GIL), and a no-op call in a process made four of them
when the pipes were the process thread's asyncio transports.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable

from orchestrator.sources.isolated.protocol import MAX_LINE

READ_SIZE = 1 << 16


class ChildInput:
    """The child's standard input: one line per write, from any thread (a blocking pipe, so a
    long line waits for the child to read it, which its loop does at once)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return self._fd is not None

    def send(self, line: bytes) -> None:
        """Write `line` whole (OSError when the child is gone)."""
        with self._lock:
            if self._fd is None:
                raise BrokenPipeError("the process ended")
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """End the child's input (it then ends); closing twice is nothing."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class ChildOutput:
    """The child's standard output, read line by line on the loop that last `watch`ed it.

    One loop watches at a time; moving to another asks the old one to stop, and until it
    has, a lock keeps each read and the line being put together whole. `on_line` gets
    each complete line, on whichever thread read it; `on_broken` why the output can no
    longer be read (a line over the limit), for the process to be ended.
    """

    def __init__(
        self, fd: int, *, on_line: Callable[[bytes], None], on_broken: Callable[[str], None]
    ) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._on_line = on_line
        self._on_broken = on_broken
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: str | None = None  # why no more lines come
        self._closed = False

    @property
    def ended(self) -> str | None:
        """Why the output ended (None while it goes on)."""
        return self._ended

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read it on `loop` (the running one: its thread calls this) from now on."""
        with self._lock:
            old = self._loop
            if old is loop or self._ended is not None:
                return
            self._loop = loop
            loop.add_reader(self._fd, self._readable)
        if old is not None and not old.is_closed():
            old.call_soon_threadsafe(self._unwatch, old)

    def drain(self) -> None:
        """Read what is left (the child has ended: its last answers are in the pipe)."""
        while self._read_once():
            pass
        with self._lock:
            self._ended = self._ended or "its output ended"

    def close(self) -> None:
        """Stop reading and close the pipe, on the loop that watches it (which may be polling it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._ended = self._ended or "closed"
            loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            os.close(self._fd)
        elif running_here(loop):
            self._release(loop)
        else:
            loop.call_soon_threadsafe(self._release, loop)

    def _readable(self) -> None:
        """On the watching loop, when there is something to read (or the end)."""
        self._read_once()
        if self._ended is not None:  # at its end the pipe stays readable: stop watching it
            asyncio.get_running_loop().remove_reader(self._fd)

    def _read_once(self) -> bool:
        """Read what the pipe holds now and hand on its lines; False when nothing more can come
        now (nothing waiting, or the end)."""
        with self._lock:
            if self._ended is not None:
                return False
            try:
                data = os.read(self._fd, READ_SIZE)
            except BlockingIOError:  # another loop read it first, or nothing waits
                return False
            except OSError as error:
                data, self._ended = b"", f"its output failed: {error}"
            if not data:
                self._ended = self._ended or "its output ended"
                return False
            self._buffer += data
            *lines, rest = self._buffer.split(b"\n")
            self._buffer = bytearray(rest)
            broken = len(self._buffer) > MAX_LINE
            if broken:
                self._ended = f"unreadable answer: a line over {MAX_LINE} bytes"
        for line in lines:
            self._on_line(bytes(line))
        if broken:
            self._on_broken(self._ended or "")
        return not broken

    def _unwatch(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._loop is not loop:  # it moved on: the fd is another loop's to watch now
                loop.remove_reader(self._fd)

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self._fd)
        os.close(self._fd)


def running_here(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is the one running on this thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
