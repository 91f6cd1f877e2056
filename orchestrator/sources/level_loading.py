"""The approved folders of a tree loaded level by level, each at its own level (see `levels`).

A folder runs with its parent's model, database, limits and log level unless its
`tool_config.yaml` sets its own. An agent's graph is built by the host's
`GraphFactory` over the tools of the folders below it (and those of the sources
given for its level), so this package needs nothing of the graph, the model
providers or the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool

from orchestrator.errors import (
    ConfigError,
    FolderUnavailableError,
    SandboxUnavailableError,
    ToolLoadError,
)
from orchestrator.folders.approvals import ApprovalStore, Reviewed
from orchestrator.folders.discovery import CHILDREN_DIR, FolderNode, ToolFolder, content_hash
from orchestrator.folders.importer import package_name
from orchestrator.folders.isolation import in_process, needs_database
from orchestrator.folders.load_failures import remember_failure
from orchestrator.folders.loader import load_tool, visible_sources
from orchestrator.folders.scope import resolve_scopes
from orchestrator.folders.skipped import report_skipped
from orchestrator.folders.untrusted import printable
from orchestrator.levels import LevelConfig
from orchestrator.redact import redact
from orchestrator.sources.adapter import langchain_tools
from orchestrator.sources.agent_states import agent_state, check_state
from orchestrator.sources.deferred import LoadOnce, deferred_tools
from orchestrator.sources.folder_migrations import migrate_folder
from orchestrator.sources.isolated.process import FolderProcesses
from orchestrator.sources.level_resolver import LevelResolver
from orchestrator.sources.loaded import LoadedTool
from orchestrator.sources.manifest import Manifests, ToolEntry, entry_of, offered
from orchestrator.sources.mcp.clients import McpClients
from orchestrator.tools.agent import AgentTool, GraphFactory
from orchestrator.tools.base import ToolContext

if TYPE_CHECKING:
    from orchestrator.folders.tool_config import ToolConfig
    from orchestrator.settings import Settings
    from orchestrator.tools.context import TextEmbedder

logger = logging.getLogger(__name__)

NOT_STARTED = "MCP server %s: not started here (only Orchestrator.start, asynchronous, starts them)"
CHANGED = "its files changed since this start approved them; restart to be asked about them again"
UNAVAILABLE = "{name} could not be imported at its first call: {error}"
NEEDS_DATABASE = (
    "{name} has tables of its own (migrations/ or db:), which its sandboxed process cannot reach: "
    "to run it inline, in the orchestrator's process with all you can reach, give it "
    "`sandbox: {{isolation: inline}}`"
)

# The tools given for the level at a path (agent names from the top), beside its folders'.
LevelTools = Callable[[tuple[str, ...]], Sequence[BaseTool]]


def _no_tools(_: tuple[str, ...]) -> Sequence[BaseTool]:
    return ()


class LevelLoader:
    """Imports the approved folders below `top`, each at its level; a folder that cannot be
    used is logged and skipped (and, when its code is at fault, asked about again next time).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        top: LevelConfig,
        build_graph: GraphFactory,
        embedder: TextEmbedder | None = None,
        level_tools: LevelTools = _no_tools,
    ) -> None:
        self.settings = settings
        self.top = top
        self.processes = FolderProcesses(
            data_dir=settings.data_dir, require_sandbox=settings.require_sandbox
        )
        self.manifests = Manifests()  # what the approved folders gave, for the next start
        self._build_graph = build_graph
        self._embedder = embedder  # handed to the tools (ToolContext.embedder)
        self._level_tools = level_tools
        self._levels = LevelResolver(settings)
        self._servers: McpClients | None = None

    def tree(self, reviewed: Reviewed, *, servers: McpClients | None) -> list[LoadedTool]:
        """The approved folders of `reviewed`, from the top; MCP folders only with `servers`."""
        self._servers = servers
        return self._level(reviewed.tree.nodes, reviewed.approved, parent=self.top)

    async def close(self) -> None:
        """Stop the folders' processes and close the databases folders of their own opened."""
        await self.processes.close()
        await self._levels.close()

    def _level(
        self, nodes: list[FolderNode], approved: set[str], *, parent: LevelConfig
    ) -> list[LoadedTool]:
        loaded: list[LoadedTool] = []
        for node in nodes:
            if node.folder.key not in approved:
                continue
            try:
                if node.folder.config.mcp is not None:
                    loaded.extend(self._server(node.folder, parent=parent))
                elif in_process(node.folder):
                    loaded.append(self._isolated(node.folder, parent=parent))
                else:
                    later = self._deferred(node, approved, parent=parent)
                    loaded.append(later or self._now(node, approved, parent=parent))
            except (ToolLoadError, ConfigError) as error:
                self._skipped(node.folder, error)
        return loaded

    def _skipped(self, folder: ToolFolder, error: ToolLoadError | ConfigError) -> None:
        """Say why; a folder whose code cannot be loaded is not kept as approved."""
        root = self.settings.sub_graphs_dir
        report_skipped(logger, folder.path, str(error), sub_graphs_dir=root)
        if isinstance(error, ToolLoadError):  # asked about again once it may work
            store = ApprovalStore.of(self.settings)
            store.forget(folder.key)
            remember_failure(store.path.parent, folder, str(error))  # `tools list` says why

    def _load(self, node: FolderNode, approved: set[str], *, parent: LevelConfig) -> LoadedTool:
        folder = node.folder
        tool = load_tool(folder, sources=visible_sources(node, approved))
        scopes = resolve_scopes(tool, folder.config.parameters)
        check_state(folder.config, agent=isinstance(tool, AgentTool))
        level = self._levels.child(parent, folder.config, agent=isinstance(tool, AgentTool))
        migrate_folder(folder, level.database)  # its tables, before it can use them
        data_dir = tool_data_dir(self.settings.data_dir, folder.key)
        context = ToolContext(
            data_dir=data_dir, database=level.database, folder=folder.path, embedder=self._embedder
        )
        tool.bind_context(context)
        self._set_log_level(folder, level)
        children: list[LoadedTool] = []
        if isinstance(tool, AgentTool):
            children = self._level(node.children, approved, parent=level)
            prompt = tool.system_prompt(folder.config.instructions)
            level = replace(level, system_prompt=prompt)
            below = [t for child in children for t in child.langchain]
            below += self._level_tools(level.path)
            graph = self._build_graph(level, below, name=tool.name, system_prompt=prompt)
            state = agent_state(folder.config, level, self.settings)
            tool.attach(graph=graph, tools=below, state=state)
        unapproved = [c.folder.name for c in node.children if c.folder.key not in approved]
        config = call_config(folder.config, level)
        tools = langchain_tools(tool, config=config, scopes=scopes, folder=folder.path)
        return LoadedTool(folder, tool, children, tools, unapproved, level=level)

    def _now(self, node: FolderNode, approved: set[str], *, parent: LevelConfig) -> LoadedTool:
        """The folder imported now; its manifest written for the next start when it may defer."""
        loaded = self._load(node, approved, parent=parent)
        if not node.children and not isinstance(loaded.tool, AgentTool):
            self.manifests.write(node.folder, loaded.langchain)
        return loaded

    def _deferred(
        self, node: FolderNode, approved: set[str], *, parent: LevelConfig
    ) -> LoadedTool | None:
        """The folder offered from its manifest, imported at its first call; None without one.

        An agent's tree (a folder with folders of its own) loads now: see docs/folders.md.
        """
        folder = node.folder
        entries = None if node.children else self.manifests.read(folder)
        if entries is None:
            return None
        level = self._levels.child(parent, folder.config, agent=False)
        later = LoadOnce(partial(self._first_call, node, approved, parent=parent, entries=entries))
        # What the level sets now, not what it set when the manifest was written.
        now = offered(entries, folder, timeout_seconds=level.limits.timeout_seconds)
        tools = deferred_tools(now, folder_name=folder.name, real_tools=lambda: later.get().langchain)
        return LoadedTool(folder, None, langchain=tools, level=level, later=later)

    def _first_call(
        self, node: FolderNode, approved: set[str], *, parent: LevelConfig, entries: list[ToolEntry]
    ) -> LoadedTool:
        """Import a deferred folder, as a start would have: only while its files are as approved.

        The import itself runs the sources hashed at this start (see `importer`); the
        files it reads at run time are on disk, so they are hashed again first.
        """
        folder = node.folder
        try:
            if _hash_now(folder) != folder.digest:
                raise ToolLoadError(CHANGED)
            loaded = self._load(node, approved, parent=parent)
        except (ToolLoadError, ConfigError) as error:
            self._skipped(folder, error)
            # For the model: no secrets, no paths outside the folder (as any tool's failure).
            message = UNAVAILABLE.format(name=folder.name, error=error)
            raise FolderUnavailableError(redact(message, keep=[folder.path.resolve()])) from None
        if [entry_of(tool) for tool in loaded.langchain] != entries:  # it gives other tools now
            self.manifests.write(folder, loaded.langchain)
        return loaded

    def _isolated(self, folder: ToolFolder, *, parent: LevelConfig) -> LoadedTool:
        """A folder whose actions run in a sandboxed process of its own, started now."""
        from orchestrator.sources.isolated.tool import isolated_tools

        check_state(folder.config, agent=False)  # its tool runs in a process: no agent
        if folder.config.sandbox.isolation is None and needs_database(folder):
            raise ConfigError(NEEDS_DATABASE.format(name=folder.name))
        level = self._levels.child(parent, folder.config, agent=False)
        tool_data = tool_data_dir(self.settings.data_dir, folder.key)
        process = self.processes.process(folder, tool_data=tool_data)
        try:
            process.start_now()
        except SandboxUnavailableError as error:  # not its code's fault: not asked again
            raise ConfigError(str(error)) from None
        config = call_config(folder.config, level)
        tools = isolated_tools(process, config=config, folder=folder.path)
        return LoadedTool(folder, None, langchain=tools, level=level)

    def _server(self, folder: ToolFolder, *, parent: LevelConfig) -> list[LoadedTool]:
        """The folder of an MCP server whose definition is approved; none otherwise."""
        if self._servers is None:  # `load`: nothing is started
            logger.warning(NOT_STARTED, printable(folder.name))
            return []
        definition = self._servers.approved.get(folder.key)
        if definition is None:  # not approved, or failed: said when it was settled
            return []
        from orchestrator.sources.mcp.tool import mcp_tools  # the SDK loads only for a server

        level = self._levels.child(parent, folder.config, agent=False)
        server = self._servers.server(folder.key)
        config = call_config(folder.config, level)
        tools = mcp_tools(server, definition, config=config, folder=folder.path)
        return [LoadedTool(folder, None, langchain=tools, level=level)]

    def _set_log_level(self, folder: ToolFolder, level: LevelConfig) -> None:
        # Only a level a folder set (here or above): the rest follows the process's logging.
        if level.log_level is not None and level.log_level != self.top.log_level:
            logging.getLogger(package_name(folder.path)).setLevel(level.log_level)


def call_config(config: ToolConfig, level: LevelConfig) -> ToolConfig:
    """`config` with its calls' timeout: its own `timeout_seconds`, else the level's limit."""
    if "timeout_seconds" in config.model_fields_set:
        return config
    return config.model_copy(update={"timeout_seconds": level.limits.timeout_seconds})


def _hash_now(folder: ToolFolder) -> str | None:
    try:
        return content_hash(folder.path)
    except (OSError, ValueError):  # unreadable or refused now: not what was approved
        return None


def tool_data_dir(data_dir: Path, key: str) -> Path:
    """A folder's `ToolContext.data_dir`."""
    # data/tools/assistant/mail for the folder sub_graphs/assistant/src/sub_graphs/mail
    return data_dir / "tools" / key.replace(f"/{CHILDREN_DIR.as_posix()}/", "/")
