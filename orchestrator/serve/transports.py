"""How `mcp serve` reaches its clients over standard input and output (HTTP: `http_transport`).

Over stdio the process's standard input and output are the protocol's alone:
`claim_stdio` moves them to descriptors of their own before anything runs,
so that a tool's `print`, a child process's output or a log line goes to
standard error, and no child process can read the client's messages.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from io import TextIOWrapper

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

# The longest message line read from a pipe; a tool call's arguments may be large.
MAX_LINE_BYTES = 64 * 1024 * 1024
GRACE_SECONDS = 3  # how long a stop waits for open requests and streams


@dataclass(frozen=True)
class StdioProtocol:
    """The descriptors the client's messages come in on and the answers go out on."""

    input_fd: int
    output_fd: int


def claim_stdio() -> StdioProtocol:
    """Keep standard input and output for the protocol; from now on fd 0 reads nothing and
    fd 1 writes to standard error (for this process and every child it starts)."""
    sys.stdout.flush()
    protocol = StdioProtocol(os.dup(0), os.dup(1))  # not inherited by child processes
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)
    return protocol


async def serve_stdio(server: Server, protocol: StdioProtocol) -> None:
    """Serve one client on the claimed descriptors until it closes its end."""
    lines = await _input_lines(protocol.input_fd)
    output = anyio.wrap_file(TextIOWrapper(os.fdopen(protocol.output_fd, "wb"), encoding="utf-8"))
    # mcp only iterates stdin's lines, though its type asks for an anyio file.
    async with stdio_server(stdin=lines, stdout=output) as (read, write):  # pyright: ignore[reportArgumentType]
        await server.run(read, write, server.create_initialization_options())


class _PipeLines:
    """The lines of a pipe, read on the event loop: a signal's cancellation never waits for input
    (reading on a thread, as the SDK does, cannot be cancelled until a line comes)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


async def _input_lines(fd: int) -> AsyncIterable[str]:
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):  # a file, a terminal: read on a thread
        text = TextIOWrapper(os.fdopen(fd, "rb"), encoding="utf-8", errors="replace")
        return anyio.wrap_file(text)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    pipe = os.fdopen(fd, "rb", 0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return _PipeLines(reader)
