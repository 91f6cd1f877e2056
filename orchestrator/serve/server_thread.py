"""The MCP server on a thread of its own, answering from the start of `mcp serve`.

The server starts before the database, the model and the folders are ready:
`initialize` is answered at once, and so is `tools/list` when the folders'
manifests give the list (see `listing`). What needs the runtime waits for it:
a `tools/call` (and a listing the manifests could not give) waits until the
command hands it over (`ready`), then runs on the command's event loop, where
the runtime, its database connections and its tools live.

Nothing else competes with the first answer: `mcp serve` starts the database
and builds the runtime once the client has asked for the tools (see `asked`).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass

from mcp import types
from mcp.server.lowlevel import Server

from orchestrator.serve.transports import GRACE_SECONDS, StdioProtocol, serve_stdio
from orchestrator.version import __version__

SERVER_NAME = "orchestrator"

Call = Callable[[str, dict[str, object]], Coroutine[object, object, types.CallToolResult]]


@dataclass(frozen=True)
class RuntimeTools:
    """What the command hands the server once its runtime is ready."""

    listing: list[types.Tool]
    call: Call  # run on `loop`
    loop: asyncio.AbstractEventLoop


@dataclass(frozen=True)
class Endpoint:
    """Where the server reads its clients: the claimed standard input and output, or a socket."""

    protocol: StdioProtocol | None = None
    listening: socket.socket | None = None
    host: str = "127.0.0.1"


class ServerThread:
    """An MCP server serving on a thread of its own until its client leaves or `stop` is called.

    `offered`: the first listing, from the manifests (None: the runtime's is waited for).
    """

    def __init__(self, endpoint: Endpoint, *, offered: list[types.Tool] | None) -> None:
        self.endpoint = endpoint
        self.offered = offered
        self.url: Future[str] = Future()  # HTTP: the URL it serves at, once it listens
        self._runtime: Future[RuntimeTools] = Future()
        self._done: Future[None] = Future()
        for future in (self.url, self._runtime, self._done):
            # Running from the start: a call or a command cancelled while it awaits one of
            # them must not cancel it for everyone else.
            future.set_running_or_notify_cancel()
        self._serving = threading.Event()
        self._asked = threading.Event()  # a first listing or call came, or the server stopped
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        # A daemon: a command that fails to start exits without waiting for a client to leave.
        self._thread = threading.Thread(target=self._run, name="mcp-server", daemon=True)

    def start(self) -> None:
        """Start serving; returns once the server's event loop runs."""
        self._thread.start()
        self._serving.wait()

    def asked(self, *, timeout: float) -> bool:
        """Whether a client has asked for the tools or called one (or the server stopped),
        waiting for it `timeout` s at most: a client may ask for nothing at first."""
        return self._asked.wait(timeout)

    def ready(self, runtime: RuntimeTools) -> None:
        """The runtime is ready: calls (and listings) go to it from now on."""
        self._runtime.set_result(runtime)

    async def finished(self) -> None:
        """Return once the server has stopped (its client left); raise what stopped it."""
        await asyncio.wrap_future(self._done)

    async def address(self) -> str:
        """HTTP: the URL it serves at, once it listens; raise what stopped it if it stopped first."""
        listening = asyncio.wrap_future(self.url)
        await asyncio.wait([listening, asyncio.wrap_future(self._done)], return_when=asyncio.FIRST_COMPLETED)
        if not listening.done():
            await self.finished()
            raise RuntimeError("the MCP server stopped before it listened")
        return listening.result()

    def stop(self) -> None:
        """Stop serving (calls still waiting are cancelled); wait GRACE_SECONDS at most."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not self._done.done():
            with suppress(RuntimeError):  # its loop closed meanwhile: it has stopped already
                loop.call_soon_threadsafe(task.cancel)
        if self._thread.is_alive():
            self._thread.join(GRACE_SECONDS)

    async def listing(self) -> list[types.Tool]:
        """The served tools: the runtime's once it is ready, before then the manifests'."""
        self._asked.set()
        if self.offered is not None and not self._runtime.done():
            return self.offered
        return (await asyncio.wrap_future(self._runtime)).listing

    async def call(self, name: str, arguments: dict[str, object]) -> types.CallToolResult:
        """Run one call on the runtime's event loop, once it is ready."""
        self._asked.set()
        runtime = await asyncio.wrap_future(self._runtime)
        running = asyncio.run_coroutine_threadsafe(runtime.call(name, arguments), runtime.loop)
        return await asyncio.wrap_future(running)  # cancelled here: cancelled there too

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except asyncio.CancelledError:  # stopped
            self._done.set_result(None)
        except BaseException as error:  # handed to whoever awaits `finished`
            self._done.set_exception(error)
        else:
            self._done.set_result(None)
        finally:  # never leave `start` or `asked` waiting
            self._serving.set()
            self._asked.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._serving.set()
        server = build_server(self)
        endpoint = self.endpoint
        if endpoint.protocol is not None:
            await serve_stdio(server, endpoint.protocol)
        elif endpoint.listening is not None:
            from orchestrator.serve.http_transport import serve_http

            await serve_http(
                server, endpoint.listening, host=endpoint.host, on_ready=self.url.set_result
            )


def build_server(served: ServerThread) -> Server:
    """An MCP server offering `served`'s tools."""
    server: Server = Server(SERVER_NAME, version=__version__)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return await served.listing()

    # The pipeline validates the arguments: a bad call is answered, and logged, like any other.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, object]) -> types.CallToolResult:
        return await served.call(name, arguments)

    return server
