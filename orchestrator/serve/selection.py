"""Which tools `mcp serve` offers, and which folders it leaves out for want of a decision."""

from __future__ import annotations

from collections.abc import Iterator

from langchain_core.tools import BaseTool

from orchestrator.folders.approvals import ApprovalStore, Reviewed, Status
from orchestrator.folders.discovery import FolderNode
from orchestrator.runtime import Orchestrator
from orchestrator.serve.listing import no_such_folder
from orchestrator.settings import Settings
from orchestrator.sources.folder_tools import FolderSource


def served_tools(runtime: Orchestrator, agent: str | None = None) -> list[BaseTool]:
    """The tools of the approved top-level folders; with `agent`, of that folder alone.

    An agent folder's tools are its `<name>_ask` and its own actions; the built-in
    tools (`ask_human`, ...) are not served: they need a conversation.
    """
    loaded = runtime.sub_agents
    if agent is None:
        return [tool for folder in loaded for tool in folder.langchain]
    for folder in loaded:
        if agent in (folder.folder.name, folder.folder.key):
            return list(folder.langchain)
    raise no_such_folder(agent, [folder.folder.name for folder in loaded])


def awaiting_decision(settings: Settings, reviewed: Reviewed, runtime: Orchestrator) -> list[str]:
    """The keys of the folders left out because no one decided on them yet (new or changed),
    then those of the MCP servers whose tool definitions await a decision."""
    store = ApprovalStore.of(settings)
    folders = [node.folder.key for node in _undecided(reviewed.tree.nodes, reviewed, store)]
    sources = (source for source in runtime.sources if isinstance(source, FolderSource))
    servers = [key for source in sources for key in source.undecided_servers]
    return [*folders, *(key for key in servers if key not in folders)]


def _undecided(
    nodes: list[FolderNode], reviewed: Reviewed, store: ApprovalStore
) -> Iterator[FolderNode]:
    """New or changed folders, looking below approved folders only (as the review does)."""
    for node in nodes:
        if store.status(node.folder) in (Status.NEW, Status.CHANGED):
            yield node
        elif node.folder.key in reviewed.approved:
            yield from _undecided(node.children, reviewed, store)
