"""Loads the approved tools of one level of the tree, agents with the level below them."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from orchestrator.errors import ConfigError
from orchestrator.llm.providers import build_agent_model
from orchestrator.settings import Settings
from orchestrator.store.engine import Database
from orchestrator.tools.adapter import langchain_tools
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.base import Tool, ToolContext
from orchestrator.tools.discovery import CHILDREN_DIR, ToolFolder, ToolNode
from orchestrator.tools.hashing import SourceFile
from orchestrator.tools.loader import ToolLoadError, import_tool
from orchestrator.tools.untrusted import printable

logger = logging.getLogger(__name__)


@dataclass
class LoadedTool:
    """An approved folder's tool, with its own loaded sub-tools if it is an agent."""

    folder: ToolFolder
    tool: Tool
    children: list[LoadedTool] = field(default_factory=list)
    langchain: list[BaseTool] = field(default_factory=list)
    unapproved_children: list[str] = field(default_factory=list)  # names, for the user


def load_level(
    nodes: list[ToolNode],
    approved: set[str],
    *,
    model: BaseChatModel,
    settings: Settings,
    database: Database | None = None,
) -> list[LoadedTool]:
    """Import the approved folders of one level; a folder that fails is logged and skipped."""
    loaded = []
    for node in nodes:
        if node.folder.key not in approved:
            continue
        try:
            loaded.append(_load(node, approved, model=model, settings=settings, database=database))
        except (ToolLoadError, ConfigError) as error:
            path, reason = printable(str(node.folder.path)), printable(str(error))
            logger.warning("skipping tool folder %s: %s", path, reason)
    return loaded


def _load(
    node: ToolNode,
    approved: set[str],
    *,
    model: BaseChatModel,
    settings: Settings,
    database: Database | None,
) -> LoadedTool:
    if node.folder.config.db.inherit == "local":
        raise ToolLoadError("db: inherit: local is not supported yet; use the parent's database")
    tool = import_tool(node.folder, sources=visible_sources(node, approved))
    tool.bind_context(
        ToolContext(data_dir=_data_dir(settings.data_dir, node.folder.key), database=database)
    )
    children: list[LoadedTool] = []
    if isinstance(tool, AgentTool):
        agent_model = build_agent_model(node.folder.config.llm, parent=model, settings=settings)
        children = load_level(
            node.children, approved, model=agent_model, settings=settings, database=database
        )
        tool.attach(
            model=agent_model,
            tools=[t for child in children for t in child.langchain],
            max_iterations=settings.max_tool_iterations,
            max_result_chars=settings.max_tool_result_chars,
            tool_timeout_seconds=settings.tool_timeout_seconds,
            inline_budget_seconds=settings.inline_budget_seconds,
        )
    unapproved = [child.folder.name for child in node.children if child.folder.key not in approved]
    return LoadedTool(
        node.folder, tool, children, langchain_tools(tool, config=node.folder.config), unapproved
    )


def visible_sources(node: ToolNode, approved: set[str]) -> Mapping[str, SourceFile]:
    """What a folder's package may import: its own files and those of its approved sub-tools.

    A sub-tool's files appear where they are (`src/sub_graphs/<dir>/...`), as they
    were hashed for its own approval; a sub-tool not approved is not there at all.
    """
    visible = dict(node.folder.sources)
    for child in node.children:
        if child.folder.key in approved:
            mount = child.folder.path.relative_to(node.folder.path).as_posix()
            below = visible_sources(child, approved)
            visible.update({f"{mount}/{path}": source for path, source in below.items()})
    return visible


def _data_dir(data_dir: Path, key: str) -> Path:
    # data/tools/assistant/mail for the folder sub_graphs/assistant/src/sub_graphs/mail
    return data_dir / "tools" / key.replace(f"/{CHILDREN_DIR.as_posix()}/", "/")
