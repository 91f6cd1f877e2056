"""Up to N sessions with one MCP server (`mcp: {pool: N}`), for calls that run at once.

One session carries concurrent calls, but many servers answer them one at a
time (a stdio server whose tools block, an HTTP server with one worker per
session): a pool of N sessions, each its own process for a stdio server, lets N
calls run together. The first session is the server's as without a pool
(started with the process or at the first call, its definition settled with
the person); the others start when a call finds every running one busy, and
each is checked against the same approved definition before its first call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pydantic import JsonValue

from orchestrator.sources.mcp.definitions import ServerDefinition
from orchestrator.sources.mcp.sandboxed import ServerSandbox

if TYPE_CHECKING:
    from mcp.types import CallToolResult

    from orchestrator.sources.mcp.client import McpClient


class McpServer(Protocol):
    """What the orchestrator uses of a server: one session (`McpClient`) or a pool of them."""

    name: str
    sandbox: ServerSandbox | None

    @property
    def pinned(self) -> ServerDefinition | None:
        """The approved definition the server must give (None: none yet)."""
        ...

    @pinned.setter
    def pinned(self, definition: ServerDefinition | None) -> None: ...

    @property
    def approved_launch(self) -> dict[str, JsonValue] | None:
        """The launch approved with the pinned definition."""
        ...

    @approved_launch.setter
    def approved_launch(self, launch: dict[str, JsonValue] | None) -> None: ...

    @property
    def running(self) -> bool:
        """True while a session is open."""
        ...

    async def started(self) -> ServerDefinition:
        """Open the session on the running loop (unless open); the server's definition."""
        ...

    async def call(self, tool: str, arguments: dict[str, object]) -> CallToolResult:
        """Call `tool` on the server."""
        ...

    async def close(self) -> None:
        """End the session(s)."""
        ...


class McpPool:
    """Sessions with one server: a call goes to the least busy, starting another if all are.

    `members` are sessions of the same server; the first is the one started
    and settled as a lone session would be. Pins and approved launches are
    set on all of them, so each one is checked as the first was.
    """

    def __init__(self, members: Sequence[McpClient]) -> None:
        self.members = list(members)
        self.name = self.members[0].name
        self.sandbox = self.members[0].sandbox
        self._busy = [0] * len(self.members)
        self._choosing = threading.Lock()  # calls may come from several loops' threads

    @property
    def pinned(self) -> ServerDefinition | None:
        """The approved definition every session must give."""
        return self.members[0].pinned

    @pinned.setter
    def pinned(self, definition: ServerDefinition | None) -> None:
        for member in self.members:
            member.pinned = definition

    @property
    def approved_launch(self) -> dict[str, JsonValue] | None:
        """The launch approved with the pinned definition (see `McpClient`)."""
        return self.members[0].approved_launch

    @approved_launch.setter
    def approved_launch(self, launch: dict[str, JsonValue] | None) -> None:
        for member in self.members:
            member.approved_launch = launch

    @property
    def running(self) -> bool:
        """True while a session is open."""
        return any(member.running for member in self.members)

    async def started(self) -> ServerDefinition:
        """The first session, started (the others start when calls need them)."""
        return await self.members[0].started()

    async def call(self, tool: str, arguments: dict[str, object]) -> CallToolResult:
        """Call `tool` on the least busy session: an idle running one, else one not yet started."""
        index = self._take()
        try:
            return await self.members[index].call(tool, arguments)
        finally:
            with self._choosing:
                self._busy[index] -= 1

    async def close(self) -> None:
        """End every session."""
        for member in self.members:
            await member.close()

    def _take(self) -> int:
        with self._choosing:
            index = min(range(len(self.members)), key=self._load)
            self._busy[index] += 1
            return index

    def _load(self, index: int) -> tuple[int, bool, int]:
        return self._busy[index], not self.members[index].running, index


def pooled(size: int, member: Callable[[], McpClient]) -> McpServer:
    """A lone session for a pool of one, else a pool of `size` sessions made by `member`."""
    if size == 1:
        return member()
    return McpPool([member() for _ in range(size)])
