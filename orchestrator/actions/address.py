"""Finding an approved folder's action by its path: `email_agent send`, `personal_assistant_agent/email_agent send`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.errors import ToolError, UserError
from orchestrator.folders.approvals import Reviewed
from orchestrator.folders.discovery import CHILDREN_DIR, FolderNode, discover_tree, walk
from orchestrator.settings import Settings
from orchestrator.sources.adapter import ActionTool
from orchestrator.sources.folder_tools import LoadedTool

NOT_FOUND = "No tool folder {path!r} ({known})"
NOT_APPROVED = (
    "The tool folder {path!r} is not approved: approve it with "
    "`orchestrator tools approve {key}` (or at the prompt of `orchestrator chat`)"
)
NOT_AN_ACTION = "{tool} has no action {action!r} (its actions: {actions})"
NO_ACTIONS = (
    "{tool} has no actions of its own to run (an MCP server's tools are run by their server)"
)


@dataclass(frozen=True)
class Address:
    """One approved folder's action: the folder as loaded, and the action's LangChain tool."""

    folder: LoadedTool
    tool: ActionTool

    @property
    def tool_name(self) -> str:
        """The folder's tool name (`email_agent`)."""
        return self.tool.owner.name

    @property
    def action(self) -> str:
        """The action's name (`send`)."""
        return self.tool.spec.name


def path_parts(path: str) -> list[str]:
    """`a/b` or the key `a/src/sub_graphs/b`: the folder names from the top, `["a", "b"]`."""
    parts = [part for part in path.strip("/").split("/") if part]
    kept: list[str] = []
    position = 0
    while position < len(parts):
        if parts[position : position + 2] == list(CHILDREN_DIR.parts):
            position += 2
            continue
        kept.append(parts[position])
        position += 1
    return kept


def find_folder(loaded: Sequence[LoadedTool], path: str, *, settings: Settings) -> LoadedTool:
    """The approved folder at `path` among `loaded` (the top level); a UserError saying why not."""
    names = path_parts(path)
    level = list(loaded)
    found: LoadedTool | None = None
    for depth, name in enumerate(names):
        found = next(
            (f for f in level if name in (f.folder.name, f.tool.name if f.tool else "")), None
        )
        if found is None:
            raise _missing(names[: depth + 1], settings=settings, around=level)
        level = found.children
    if found is None:
        raise UserError(NOT_FOUND.format(path=path, known="give a folder's name"))
    return found


async def imported_now(folder: LoadedTool) -> LoadedTool:
    """`folder` with its real tools: imported now if it was offered from its manifest (see
    `sources.deferred`); a UserError saying why it cannot be."""
    try:
        return await folder.ready()
    except ToolError as error:
        raise UserError(str(error)) from None


def find_action(folder: LoadedTool, action: str) -> Address:
    """The action `action` of `folder`; a UserError listing the actions it has."""
    tools = actions_of(folder)
    if not tools:
        raise UserError(NO_ACTIONS.format(tool=folder.folder.name))
    for tool in tools:
        if tool.spec.name == action:
            return Address(folder, tool)
    names = ", ".join(t.spec.name for t in tools)
    raise UserError(NOT_AN_ACTION.format(tool=folder.folder.name, action=action, actions=names))


def actions_of(folder: LoadedTool) -> list[ActionTool]:
    """The folder's own actions (an agent's `ask` is not one: it runs the agent's model)."""
    return [tool for tool in folder.langchain if isinstance(tool, ActionTool)]


def check_approved(reviewed: Reviewed, path: str) -> None:
    """Raise a UserError unless the folder at `path` and every folder above it are approved.

    Reads the approvals only: nothing of the folder is imported.
    """
    names = path_parts(path)
    for depth in range(1, len(names) + 1):
        node = _node(reviewed.tree.nodes, names[:depth])
        if node is None:
            raise UserError(NOT_FOUND.format(path="/".join(names[:depth]), known="no such folder"))
        if node.folder.key not in reviewed.approved:
            raise UserError(NOT_APPROVED.format(path="/".join(names[:depth]), key=node.folder.key))


def _node(nodes: Sequence[FolderNode], names: list[str]) -> FolderNode | None:
    return next((node for node in walk(list(nodes)) if path_parts(node.folder.key) == names), None)


def _missing(names: list[str], *, settings: Settings, around: Sequence[LoadedTool]) -> UserError:
    """Why the folder at `names` is not loaded: not approved, or not there at all."""
    path = "/".join(names)
    node = _node(discover_tree(settings.sub_graphs_dir).nodes, names)
    if node is not None:
        return UserError(NOT_APPROVED.format(path=path, key=node.folder.key))
    known = ", ".join(sorted(f.folder.name for f in around))
    where = f"approved here: {known}" if known else "none is approved here"
    return UserError(NOT_FOUND.format(path=path, known=where))
