"""The MCP servers of the approved folders, at every level: started together, then pinned.

Nothing is launched before its folder is approved (see `tools.approval`).
Then every server starts at once, and each server's definition is put to the
person the first time and whenever it changed, with what changed tool by
tool; only an approved definition's tools are offered. A server that fails
to start is logged and skipped, unless a definition of it was approved
before: then its tools are offered from that definition and the server is
started again by their first call (and blocked if it then differs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import McpServerError
from orchestrator.tools.approval import ApprovalStore, Status
from orchestrator.tools.discovery import ToolFolder
from orchestrator.tools.mcp.definitions import ServerDefinition, changes
from orchestrator.tools.mcp.pins import approved_definition, decide, pinned, pin_status
from orchestrator.tools.mcp.server import McpServer
from orchestrator.tools.untrusted import printable

logger = logging.getLogger(__name__)

SKIPPED = "MCP server %s: %s; its tools are not offered"
FROM_PIN = "MCP server %s: %s; its approved tools are offered, and the first call starts it again"
DENIED = "MCP server %s: its tool definitions were not approved; its tools are not offered"
UNDECIDED = "MCP server %s: its tool definitions await your decision; its tools are not offered"


@dataclass(frozen=True)
class ServerQuestion:
    """Whether to approve a server's definition: new (`changes` None) or changed since approval."""

    folder: ToolFolder
    definition: ServerDefinition
    changes: list[str] | None


# The prompt: True for yes, False for no, None when the input has ended.
AskServer = Callable[[ServerQuestion], bool | None]


class McpServers:
    """The servers of the given (approved) MCP folders, keyed by folder key."""

    def __init__(self, folders: Iterable[ToolFolder], *, store: ApprovalStore, logs: Path) -> None:
        self.store = store
        self.folders = {folder.key: folder for folder in folders if folder.config.mcp is not None}
        self.servers = {key: _server(folder, logs) for key, folder in self.folders.items()}
        self.approved: dict[str, ServerDefinition] = {}
        self.undecided: list[str] = []  # folder keys whose definitions await a decision

    async def open(self, ask: AskServer | None) -> None:
        """Start every server at once, then settle each one's definition with the person."""
        starts = (server.start() for server in self.servers.values())
        started = await asyncio.gather(*starts, return_exceptions=True)
        ask = _until_input_ends(ask)
        for key, outcome in zip(list(self.servers), started, strict=True):
            if isinstance(outcome, McpServerError):
                self._failed(key, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                await self._settle(key, outcome, ask)

    async def close(self) -> None:
        """Close every session (stopping the stdio servers' processes)."""
        await asyncio.gather(*(server.close() for server in self.servers.values()))

    def server(self, key: str) -> McpServer:
        """The server of the folder `key`."""
        return self.servers[key]

    async def _settle(self, key: str, definition: ServerDefinition, ask: AskServer) -> None:
        """Offer the server's tools if its definition is approved, asking if need be."""
        folder, server = self.folders[key], self.servers[key]
        status = pin_status(self.store, key, definition)
        answer: bool | None = status == Status.APPROVED
        if status in (Status.NEW, Status.CHANGED):
            answer = await self._ask(folder, definition, status, ask)
            if answer is not None:
                decide(self.store, key, name=folder.name, definition=definition, approved=answer)
        if answer:
            server.pinned = self.approved[key] = definition
            return
        logger.warning(UNDECIDED if answer is None else DENIED, printable(folder.name))
        if answer is None:
            self.undecided.append(key)
        await server.close()

    async def _ask(
        self, folder: ToolFolder, definition: ServerDefinition, status: Status, ask: AskServer
    ) -> bool | None:
        before = pinned(self.store, folder.key) if status == Status.CHANGED else None
        question = ServerQuestion(folder, definition, changes(before[1], definition) if before else None)
        # On a thread: the servers' sessions go on being served while the person thinks.
        return await asyncio.to_thread(ask, question)

    def _failed(self, key: str, error: McpServerError) -> None:
        name, reason = printable(self.folders[key].name), printable(str(error))
        before = approved_definition(self.store, key)
        if before is None:
            logger.warning(SKIPPED, name, reason)
            return
        logger.warning(FROM_PIN, name, reason)
        self.servers[key].pinned = self.approved[key] = before


def _until_input_ends(ask: AskServer | None) -> AskServer:
    """`ask` until it first returns None (the input ended); after that, nothing is asked."""
    ended = ask is None

    def asking(question: ServerQuestion) -> bool | None:
        nonlocal ended
        answer = None if ended or ask is None else ask(question)
        ended = ended or answer is None
        return answer

    return asking


def _server(folder: ToolFolder, logs: Path) -> McpServer:
    assert folder.config.mcp is not None
    log = logs / (folder.key.replace("/", "__") + ".log")
    return McpServer(name=folder.name, config=folder.config.mcp, folder=folder.path, errlog=log)
