"""A stdio MCP server's pipes, read and written with asyncio directly, under the SDK's session.

The SDK's `stdio_client` hands each message through an anyio memory stream
to a writer task, and each answer from a reader task (which decodes and
splits the text itself) through another: per call, two more task switches
and layers of anyio checkpoints, about half the client's time of a round
trip. Here a message is written to the server's standard input where the
session sends it, and a reader task reads whole lines and hands each message
(parsed as the SDK does) straight to the session. The protocol stays the
SDK's `ClientSession`'s. The process is started and stopped as the SDK does:
in a session (process group) of its own; at the end, standard input is
closed, then the group gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import IO, Self

import anyio
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage

logger = logging.getLogger(__name__)

END_SECONDS = 2.0  # how long a server may take to exit, once its input is closed, and after SIGTERM
MAX_LINE = 64 * 1024 * 1024  # bytes of one message: a longer line ends the session
_END = object()  # what the reader hands on once the server's output has ended


class _Closable:
    """What both ends share with anyio's streams: closing, and `async with`."""

    _closed = False

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class Incoming(_Closable):
    """The server's messages, as the session reads them (the part of anyio's stream it uses)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[SessionMessage | Exception | object] = asyncio.Queue()

    def put(self, item: SessionMessage | Exception | object) -> None:
        self._queue.put_nowait(item)

    async def receive(self) -> SessionMessage | Exception:
        """The next message; EndOfStream once the output ended, ClosedResourceError once closed."""
        if self._closed:
            raise anyio.ClosedResourceError
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # for any other reader
            raise anyio.EndOfStream
        assert isinstance(item, SessionMessage | Exception)
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class Outgoing(_Closable):
    """The session's messages, written to the server's standard input as they are sent."""

    def __init__(self, stdin: asyncio.StreamWriter) -> None:
        self._stdin = stdin

    async def send(self, message: SessionMessage) -> None:
        """Write one message as a line; ClosedResourceError once closed, Broken… once it is gone."""
        if self._closed:
            raise anyio.ClosedResourceError
        line = message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n"
        try:
            self._stdin.write(line.encode())
            await self._stdin.drain()  # at once, unless the pipe is full
        except (BrokenPipeError, ConnectionResetError, RuntimeError) as error:
            # RuntimeError: asyncio refuses to write to a transport that is closing.
            raise anyio.BrokenResourceError from error


@asynccontextmanager
async def pipe_client(
    server: StdioServerParameters, *, errlog: IO[str]
) -> AsyncGenerator[tuple[Incoming, Outgoing], None]:
    """The server's process, started; its messages in, the session's out. Stopped on the way out."""
    environment = get_default_environment()
    if server.env is not None:
        environment |= server.env
    process = await asyncio.create_subprocess_exec(
        server.command,
        *server.args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=errlog,
        env=environment,
        cwd=server.cwd,
        start_new_session=True,  # a group of its own, for stopping whatever it starts too
        limit=MAX_LINE,
    )
    assert process.stdin is not None and process.stdout is not None
    incoming, outgoing = Incoming(), Outgoing(process.stdin)
    reader = asyncio.create_task(_read(process.stdout, incoming), name="mcp-pipe-reader")
    try:
        yield incoming, outgoing
    finally:
        await outgoing.aclose()
        await asyncio.shield(_stop(process))
        reader.cancel()
        await asyncio.wait({reader})


async def _read(stdout: asyncio.StreamReader, incoming: Incoming) -> None:
    """Hand each line the server writes to the session, parsed; then the end."""
    try:
        while line := await stdout.readline():
            if not line.strip():
                continue
            try:
                message = JSONRPCMessage.model_validate_json(line)
            except Exception as error:  # as the SDK: the session hears of it, and reading goes on
                logger.debug("an MCP server wrote a line that is no JSON-RPC message")
                incoming.put(error)
                continue
            incoming.put(SessionMessage(message))
    except (ValueError, OSError) as error:  # a line past MAX_LINE, a pipe that broke
        logger.debug("an MCP server's output could not be read: %s", error)
    finally:
        incoming.put(_END)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close its input and let it exit; else SIGTERM to its group, then SIGKILL."""
    assert process.stdin is not None
    with contextlib.suppress(OSError, RuntimeError):
        process.stdin.close()
    for signal_number in (None, signal.SIGTERM, signal.SIGKILL):
        if signal_number is not None and process.returncode is None:  # not reaped: still its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal_number)
        try:
            await asyncio.wait_for(process.wait(), END_SECONDS)
            return
        except TimeoutError:
            continue
