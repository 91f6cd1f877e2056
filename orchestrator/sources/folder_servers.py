"""The MCP servers of the approved folders: given started, or started by `FolderSource.open`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.sources.mcp.clients import AskServer, McpClients

if TYPE_CHECKING:
    from orchestrator.folders.approvals import Reviewed
    from orchestrator.settings import Settings


class FolderServers:
    """Starts the approved folders' MCP servers once, asking `ask` about their tool definitions.

    `clients` may be given started already (see `McpClients.start`); it stays
    None when nothing starts them (a synchronous `load`).
    """

    def __init__(self, *, ask: AskServer | None, clients: McpClients | None) -> None:
        self.clients = clients
        self._ask = ask

    async def start(self, settings: Settings, reviewed: Reviewed) -> McpClients:
        """The servers of `reviewed`'s approved MCP folders, at every level, started and pinned."""
        self.clients = self.clients or McpClients.of(settings, reviewed)
        await self.clients.open(self._ask)
        return self.clients

    @property
    def undecided(self) -> list[str]:
        """The keys of the MCP server folders whose tool definitions await the person's decision."""
        return list(self.clients.undecided) if self.clients is not None else []

    async def close(self) -> None:
        """Stop the servers (those given started too)."""
        if self.clients is not None:
            await self.clients.close()
