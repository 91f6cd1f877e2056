"""Tool folders as a tool source: the approved folders of one level, agents with the levels below.

Three parts, in the order a start needs them: the review (which folders may
load: `folder_review`), the MCP servers of the approved ones (`folder_servers`)
and the folders loaded level by level (`level_loading`). Sources given for a
level below the top (`level_sources.AtLevel`) open first: their tools join that
level's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool

from orchestrator.folders.approvals import Ask, Reviewed
from orchestrator.levels import LevelConfig
from orchestrator.sources.folder_review import reviewed_folders
from orchestrator.sources.folder_servers import FolderServers
from orchestrator.sources.level_loading import LevelLoader
from orchestrator.sources.level_sources import AtLevel, LevelSources
from orchestrator.sources.loaded import LoadedTool
from orchestrator.sources.mcp.clients import AskServer, McpClients
from orchestrator.tools.agent import AgentTool, GraphFactory

if TYPE_CHECKING:
    from orchestrator.settings import Settings
    from orchestrator.tools.context import TextEmbedder


class FolderSource:
    """The approved tool folders of the settings' `sub_graphs` directory.

    `open` asks `ask` about every new or changed folder (unless `reviewed`
    holds the answers; without either, none is approved now), starts the MCP
    servers of the approved ones and asks `ask_server` about their tool
    definitions (see `sources.mcp.clients`), then imports the approved folders.
    `load` does the same synchronously, for `Orchestrator.create`, but starts no
    MCP server. `servers` may be given started already (see `McpClients.start`).
    Its tools are those of the top-level folders; `loaded` is the
    whole tree. A folder that cannot be used is logged and skipped.
    """

    name = "folders"

    def __init__(
        self,
        settings: Settings,
        *,
        level: LevelConfig,
        build_graph: GraphFactory,
        ask: Ask | None = None,
        reviewed: Reviewed | None = None,
        ask_server: AskServer | None = None,
        servers: McpClients | None = None,
        embedder: TextEmbedder | None = None,
        below: Iterable[AtLevel] = (),
    ) -> None:
        self.settings = settings
        self.level = level
        self.loaded: list[LoadedTool] = []
        self.below = LevelSources(below)
        self.loader = LevelLoader(
            settings,
            top=level,
            build_graph=build_graph,
            embedder=embedder,
            level_tools=self.below.tools,
        )
        self._servers = FolderServers(ask=ask_server, clients=servers)
        self._ask = ask
        self._reviewed = reviewed
        self._done = False

    @property
    def servers(self) -> McpClients | None:
        """The approved folders' MCP servers; None until `open` (or when given none) starts them."""
        return self._servers.clients

    @property
    def undecided_servers(self) -> list[str]:
        """The keys of the MCP server folders whose tool definitions await the person's decision."""
        return self._servers.undecided

    def load(self) -> list[LoadedTool]:
        """Review the folders and import the approved ones, starting no MCP server (once)."""
        if not self._done:
            self._done = True
            self.below.load()
            self._load_tree(self._review(), servers=self.servers)
        return self.loaded

    async def open(self) -> None:
        """Review the folders, start and pin the approved MCP servers, import the approved folders.

        On this thread: the questions and the folders' imports belong to it.
        """
        if self._done:
            return
        self._done = True
        await self.below.open()
        reviewed = self._review()
        servers = await self._servers.start(self.settings, reviewed)
        self._load_tree(reviewed, servers=servers)

    def tools(self) -> Sequence[BaseTool]:
        """The tools of the top-level folders."""
        return [tool for loaded in self.loaded for tool in loaded.langchain]

    async def close(self) -> None:
        """Stop the MCP servers and the folders' processes, close the databases folders of
        their own opened, and the sources given for the levels below."""
        await self._servers.close()
        await self.loader.close()
        await self.below.close()

    def _review(self) -> Reviewed:
        return reviewed_folders(self.settings, ask=self._ask, reviewed=self._reviewed)

    def _load_tree(self, reviewed: Reviewed, *, servers: McpClients | None) -> None:
        self.loaded = self.loader.tree(reviewed, servers=servers)
        self.below.say_unused(set(_agent_paths(self.loaded)))


def _agent_paths(loaded: Iterable[LoadedTool]) -> Iterable[tuple[str, ...]]:
    for each in loaded:
        if isinstance(each.tool, AgentTool) and each.level is not None:
            yield each.level.path
        yield from _agent_paths(each.children)
