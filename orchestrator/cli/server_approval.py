"""`tools approve` of an MCP server's folder: its server's tools too, shown, without a chat.

Approving the folder lets its server start; what the model then receives (the
server's tools, their descriptions and schemas) is a second decision, which
`chat` asks about at its prompt. The person naming the folder on the command
line decides it here: the server is started, everything the approval covers is
printed (as chat's question shows it), and that definition is approved.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.markup import escape

from orchestrator.cli.common import err, out
from orchestrator.folders.approvals import ApprovalStore
from orchestrator.folders.discovery import ToolFolder
from orchestrator.settings import Settings
from orchestrator.terminal.text import one_line

if TYPE_CHECKING:
    from orchestrator.sources.mcp.clients import AskServer, McpClients, ServerQuestion

APPROVED_TOO = "approved: the MCP server's {count} tool(s) above, as {name} gives them now"
ALREADY = "its MCP server's tools are approved already, as {name} gives them now"
NOT_STARTED = (
    "its MCP server did not start, so its tools are not approved yet: "
    "`orchestrator tools approve {name}` again once it starts, or the prompt of `orchestrator chat`"
)


def approve_server(settings: Settings, folder: ToolFolder, store: ApprovalStore) -> None:
    """Start the (approved) MCP folder's server, print its definition, and approve it."""
    asked: list[ServerQuestion] = []

    def approve(question: ServerQuestion) -> bool:
        from orchestrator.terminal.server_prompt import describe_question

        asked.append(question)
        out.print(describe_question(question), highlight=False)
        return True

    clients = asyncio.run(_settled(settings, folder, store, approve))
    name = escape(folder.name)
    if asked:
        count = len(asked[-1].definition.tools)
        out.print(APPROVED_TOO.format(count=count, name=name), highlight=False)
    elif folder.key in clients.approved:
        out.print(ALREADY.format(name=name), highlight=False)
    else:
        err.print(f"[yellow]note:[/yellow] {escape(one_line(NOT_STARTED.format(name=folder.name)))}",
                  highlight=False)


async def _settled(
    settings: Settings, folder: ToolFolder, store: ApprovalStore, approve: AskServer
) -> McpClients:
    from orchestrator.sources.mcp.clients import LOGS, McpClients

    clients = McpClients(
        [folder],
        store=store,
        logs=settings.data_dir / LOGS,
        data_dir=settings.data_dir,
        require_sandbox=settings.require_sandbox,
    )
    try:
        await clients.open(approve)
    finally:
        await clients.close()
    return clients
