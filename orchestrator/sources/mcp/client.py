"""One MCP server's session, kept open for the life of the process.

A session is opened once (at startup, or at the first call) and every call of
the server's tools goes through it: a new session per call cost 5.3 s against
0.1 s in a kept one. The session lives in a task of its own, because the SDK's
transports must be entered and left in one task, on the loop that started it
(its home): a call on that loop runs there directly, a call from another loop
is handed over to it. A server that dies is started again by the next call;
one that comes back with other tool definitions than those approved is
blocked (see `definitions`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard, TypeVar

from pydantic import JsonValue

from orchestrator.errors import ConfigError, McpServerError, ToolError, TransientToolError
from orchestrator.folders.mcp_config import McpServerConfig
from orchestrator.private import open_private_log
from orchestrator.redact import redact
from orchestrator.sandbox.refusals import refusal
from orchestrator.sources.mcp.definitions import ServerDefinition
from orchestrator.sources.mcp.sandboxed import ServerSandbox

if TYPE_CHECKING:  # the SDK loads when a server first starts
    from langchain_mcp_adapters.sessions import Connection
    from mcp import ClientSession, McpError
    from mcp.types import CallToolResult, Tool

logger = logging.getLogger(__name__)
T = TypeVar("T")

CLOSE_SECONDS = 5.0  # how long closing a session may take before its task is cancelled
MAX_LOG_READ = 64 * 1024  # of a failed start's standard error, read for what was refused
MAX_PAGES = 100  # of `tools/list`: a server paging for ever is cut off here
NOT_STARTED = "MCP server {name} did not start: {reason}"
TIMED_OUT = "did not answer within {seconds:g}s"
DIED = (
    "MCP server {name} stopped during the call ({reason}); the call may or may not have run. "
    "The server is started again on the next call."
)
REFUSED = "MCP server {name} refused the call: {reason}"
BLOCKED = (
    "MCP server {name} gives other tool definitions than those approved: its tools are "
    "blocked until the change is approved (the next start of the orchestrator asks)"
)
LAUNCH_CHANGED = (
    "MCP server {name} was not started: its launch ({launch}) is not the one approved; "
    "approve the folder again if you changed it"
)


@dataclass
class _Open:
    """A running session, the definition the server gave at its start, and how to end it."""

    session: ClientSession
    definition: ServerDefinition
    stop: asyncio.Event
    task: asyncio.Task[None]


class McpClient:
    """The session with one MCP server (a folder's `mcp:` section).

    `start` opens it and returns the server's definition as it is now.
    `call` runs one tool call, starting the server again first if it died;
    once `pinned` is set (the approved definition), a restarted server whose
    definition differs is closed and its calls refused. `errlog` receives a
    stdio server's standard error (by default, ours). The session lives on
    the loop that first starts it; these methods may be awaited on any loop.
    With `sandbox`, a stdio server runs held by it (see `sandboxed`).
    `on_changed` hears (once, on the session's loop) that the server was blocked.
    """

    def __init__(
        self,
        *,
        name: str,
        config: McpServerConfig,
        folder: Path,
        errlog: Path | None = None,
        sandbox: ServerSandbox | None = None,
        on_changed: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.on_changed = on_changed
        self.sandbox = sandbox  # a stdio server's, unless it runs unconfined
        self.config = config
        self.folder = folder
        self.errlog = errlog
        self.pinned: ServerDefinition | None = None
        # The launch last approved, when no later folder approval may have changed it.
        self.approved_launch: dict[str, JsonValue] | None = None
        self._open: _Open | None = None
        # The start under way, on the home loop: callers share it, and one that gives up
        # (its call timed out) leaves it going, so that a slow server comes up for the next.
        self._start: asyncio.Future[_Open] | None = None
        self._blocked = False  # it gave another definition than the pinned one: no more starts
        self._home: asyncio.AbstractEventLoop | None = None  # the loop its session lives on
        self._homing = threading.Lock()
        self._log_start = 0  # where the standard error of the start under way begins in errlog

    @property
    def running(self) -> bool:
        """True while a session is open."""
        return self._open is not None

    async def start(self) -> ServerDefinition:
        """Open the session (if not open); the server's definition. McpServerError if it fails."""
        return await self._at_home(self.started())

    async def call(self, tool: str, arguments: dict[str, object]) -> CallToolResult:
        """Call `tool`; a server not running is started (and checked against the pin) first."""
        return await self._at_home(self._call(tool, arguments))

    async def close(self) -> None:
        """End the session (a stdio server's process with it), if one was ever started."""
        if self._home is not None:
            await self._at_home(self._close())

    async def started(self) -> ServerDefinition:
        """`start`, on the running loop, which becomes the session's home unless it has one."""
        if self._homed(asyncio.get_running_loop()) is not asyncio.get_running_loop():
            return await self.start()
        if self._open is None:
            if self._start is None:
                self._start = asyncio.ensure_future(self._opened())
                self._start.add_done_callback(self._started_now)
            opened = await asyncio.shield(self._start)
            return opened.definition
        return self._open.definition

    def _started_now(self, start: asyncio.Future[_Open]) -> None:
        if self._start is start:
            self._start = None
            if not start.cancelled() and start.exception() is None:
                self._open = start.result()

    async def _at_home(self, work: Coroutine[object, object, T]) -> T:
        """Await `work` on the session's loop: here if this is it, else handed over to it.

        Cancelling here cancels it there.
        """
        here = asyncio.get_running_loop()
        home = self._homed(here)
        if home is here:
            return await work
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, home))

    def _homed(self, here: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        """The session's loop: `here` unless it has one (a closed one's session ended with it)."""
        with self._homing:
            if self._home is None or self._home.is_closed():
                self._home, self._open, self._start = here, None, None
            return self._home

    async def _call(self, tool: str, arguments: dict[str, object]) -> CallToolResult:
        from mcp import McpError

        current = await self._pinned_session()
        try:
            return await _call_tool(current, tool, arguments)
        except _closed():  # it died while idle: the call never reached it, so it may be sent again
            await self._lost(current)
            current = await self._pinned_session()
            return await self._send(current, tool, arguments)
        except McpError as error:
            raise await self._mcp_error(current, error) from None

    async def _close(self) -> None:
        if self._start is not None:  # a start under way ends first (within its timeout)
            await asyncio.wait({self._start})
        current, self._open = self._open, None
        if current is not None:
            await _end(current)

    async def _send(
        self, current: _Open, tool: str, arguments: dict[str, object]
    ) -> CallToolResult:
        from mcp import McpError

        try:
            return await _call_tool(current, tool, arguments)
        except _closed() as error:
            await self._lost(current)
            raise TransientToolError(
                DIED.format(name=self.name, reason=self._reason(error))
            ) from None
        except McpError as error:
            raise await self._mcp_error(current, error) from None

    async def _mcp_error(self, current: _Open, error: McpError) -> ToolError:
        from mcp.types import CONNECTION_CLOSED

        if error.error.code == CONNECTION_CLOSED:  # it died while the call ran
            await self._lost(current)
            return TransientToolError(DIED.format(name=self.name, reason=error.error.message))
        # A protocol error (an unknown tool, invalid parameters): the model's to fix.
        reason = redact(error.error.message)
        return ToolError(REFUSED.format(name=self.name, reason=reason), recoverable=False)

    async def _pinned_session(self) -> _Open:
        """The running session (started if need be) of a server that gives the pinned definition."""
        if not self._blocked:
            definition = await self.started()
            if self.pinned is None or definition.digest == self.pinned.digest:
                assert self._open is not None
                return self._open
            self._blocked = True  # nothing of the changed server reaches the model or runs
            await self._close()
            if self.on_changed is not None:
                self.on_changed()
        raise McpServerError(BLOCKED.format(name=self.name), recoverable=False)

    async def _lost(self, current: _Open) -> None:
        """Forget a session that died (once, however many calls found out)."""
        if self._open is current:
            self._open = None
        logger.warning("MCP server %s stopped; it is started again on its next call", self.name)
        await _end(current)

    def _check_launch(self) -> None:
        """Refuse, before any process starts, a launch that is not the approved one."""
        expected = self.pinned.launch if self.pinned is not None else self.approved_launch
        launch = self.config.launch()
        if expected is not None and launch != expected:
            shown = redact(" ".join(str(part) for part in _launch_words(launch)))
            raise McpServerError(LAUNCH_CHANGED.format(name=self.name, launch=shown))

    def _check_sandbox(self) -> None:
        """Refuse, before any process starts, a sandbox that is required and cannot be enforced."""
        if self.sandbox is None or self.config.command is None:
            return
        try:
            connection = self.config.connection(folder=self.folder)
            assert connection["transport"] == "stdio"
            self.sandbox.check(name=self.name, command=connection["command"], folder=self.folder)
        except ConfigError as error:  # a variable or command missing: said as any failed start
            raise self._not_started(str(error)) from None

    async def _opened(self) -> _Open:
        self._log_start = _size(self.errlog)  # what this start writes comes after
        self._check_launch()
        self._check_sandbox()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[ClientSession, ServerDefinition]] = loop.create_future()
        stop = asyncio.Event()
        task = asyncio.create_task(self._hold(ready, stop), name=f"mcp-server-{self.name}")
        seconds = self.config.startup_timeout_seconds
        try:
            session, definition = await asyncio.wait_for(asyncio.shield(ready), seconds)
        except TimeoutError:
            await _stopped(task)  # a server that hangs is not left running
            raise self._not_started(TIMED_OUT.format(seconds=seconds)) from None
        except asyncio.CancelledError:
            task.cancel()
            raise
        except Exception as error:  # the transports wrap what went wrong in exception groups
            raise self._not_started(self._reason(error)) from None
        return _Open(session, definition, stop, task)

    def _not_started(self, reason: str) -> McpServerError:
        if self.errlog is not None and self.config.command is not None:
            refused = self._refused()
            reason += f"; {refused}" if refused else ""
            reason += f" (what it wrote: {self.errlog})"
        return McpServerError(NOT_STARTED.format(name=self.name, reason=reason))

    def _refused(self) -> str | None:
        """What the sandbox refused, as this start's standard error says, and how to allow it."""
        if self.sandbox is None or self.errlog is None or self.config.command is None:
            return None
        try:
            with self.errlog.open("rb") as log:
                log.seek(self._log_start)
                written = log.read(MAX_LOG_READ).decode("utf-8", "replace")
            connection = self.config.connection(folder=self.folder)
            assert connection["transport"] == "stdio"
            rules = self.sandbox.policy(command=connection["command"], folder=self.folder)
        except (OSError, ConfigError):
            return None
        found = refusal(written, rules)
        return found.advice() if found is not None else None

    def _reason(self, error: BaseException) -> str:
        """What went wrong, in one line; paths of its folder and command shown, secrets not."""
        shown = [self.folder, *([Path(self.config.command).parent] if self.config.command else [])]
        return _reason(error, keep=shown)

    async def _hold(
        self, ready: asyncio.Future[tuple[ClientSession, ServerDefinition]], stop: asyncio.Event
    ) -> None:
        """The session's task: open it, hand it over, keep it until told to stop."""
        try:
            async with self._session() as session:
                init = await session.initialize()
                tools = await _all_tools(session)
                definition = ServerDefinition.of(
                    launch=self.config.launch(),
                    info=init.serverInfo,
                    instructions=init.instructions,
                    tools=tools,
                )
                ready.set_result((session, definition))
                await stop.wait()
        except Exception as error:
            if not ready.done():
                ready.set_exception(error)
            else:
                logger.debug("MCP server %s ended: %s", self.name, self._reason(error))

    def _session(self) -> AbstractAsyncContextManager[ClientSession]:
        from langchain_mcp_adapters.sessions import create_session

        connection = self.config.connection(folder=self.folder)
        if connection["transport"] == "stdio" and self.sandbox is not None:
            connection = self.sandbox.wrap(connection, folder=self.folder)
        if connection["transport"] == "stdio" and self.errlog is not None:
            return _stdio_session(connection, self.errlog)
        return create_session(connection)


@asynccontextmanager
async def _stdio_session(
    connection: Connection, errlog: Path
) -> AsyncGenerator[ClientSession, None]:
    """A stdio session whose server writes its standard error to `errlog`, not over the chat."""
    from mcp import ClientSession, StdioServerParameters

    from orchestrator.sources.mcp.pipe import pipe_client

    assert connection["transport"] == "stdio"
    parameters = StdioServerParameters(
        command=connection["command"],
        args=connection["args"],
        env=connection.get("env"),
        cwd=connection.get("cwd"),
    )
    # data/logs/mcp/NAME.log: a server may print a secret to standard error.
    with open_private_log(errlog, levels=2) as log:
        async with (
            pipe_client(parameters, errlog=log) as (read, write),
            # The SDK types its streams as memory streams; it uses only what the pipe's have.
            ClientSession(read, write) as session,  # pyright: ignore[reportArgumentType]
        ):
            yield session


async def _call_tool(current: _Open, tool: str, arguments: dict[str, object]) -> CallToolResult:
    """One call on the session, its content checked against the output schema given at start."""
    from orchestrator.sources.mcp.calling import call_tool

    known = current.definition.tools.get(tool)
    schema = known.outputSchema if known is not None else None
    return await call_tool(current.session, tool, arguments, output_schema=schema)


def _closed() -> tuple[type[Exception], ...]:
    """What a transport raises once its session is gone: the request never left."""
    import anyio

    return (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


def _launch_words(launch: dict[str, JsonValue]) -> list[JsonValue]:
    args = launch.get("args")
    return [launch.get("url") or launch.get("command"), *(args if isinstance(args, list) else [])]


async def _all_tools(session: ClientSession) -> list[Tool]:
    from mcp.types import PaginatedRequestParams

    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


async def _end(current: _Open) -> None:
    current.stop.set()
    done, _ = await asyncio.wait({current.task}, timeout=CLOSE_SECONDS)
    if not done:
        await _stopped(current.task)


async def _stopped(task: asyncio.Task[None]) -> None:
    """Cancel the session's task and wait (a while) for its transport to stop the server."""
    task.cancel()
    await asyncio.wait({task}, timeout=CLOSE_SECONDS)


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def _reason(error: BaseException, *, keep: list[Path]) -> str:
    """What went wrong, in one line: the first error inside exception groups."""
    from mcp import McpError

    while _is_group(error) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, McpError):
        return redact(error.error.message, keep=keep)
    text = str(error) or type(error).__name__
    return redact(" ".join(text.split()), keep=keep)


def _is_group(error: BaseException) -> TypeGuard[BaseExceptionGroup[BaseException]]:
    return isinstance(error, BaseExceptionGroup)
