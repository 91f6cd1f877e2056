"""Finding an approved folder's action by its path: `email_agent send`, `personal_assistant_agent/email_agent send`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.actions.runnable import Runnable, action_name, folder_name
from orchestrator.errors import ToolError, UserError
from orchestrator.folders.approvals import ApprovalStore, Reviewed
from orchestrator.folders.discovery import Discovery, FolderNode, ToolFolder, discover_tree
from orchestrator.folders.naming import find_in_tree, lineage, short_path
from orchestrator.settings import Settings
from orchestrator.sources.loaded import LoadedTool
from orchestrator.sources.mcp.pins import approved_definition

NOT_APPROVED = (
    "The tool folder {path!r} is not approved: approve it with "
    "`orchestrator tools approve {path}` (or at the prompt of `orchestrator chat`)"
)
SERVER_UNDECIDED = (
    "The tools of the MCP server of {path!r} are not approved: `orchestrator tools approve "
    "{path}` shows them and approves them (or the prompt of `orchestrator chat`)"
)
NOT_LOADED = (
    "The tool folder {path!r} is approved but was not loaded (the warning above says why; "
    "`orchestrator tools show {path}` shows it)"
)
NOT_AN_ACTION = "{tool} has no action {action!r} (its actions: {actions})"
NO_ACTIONS = "{tool} has no actions of its own to run"


@dataclass(frozen=True)
class Address:
    """One approved folder's action (or its MCP server's tool): the folder as loaded, and
    the action's LangChain tool."""

    folder: LoadedTool
    tool: Runnable

    @property
    def tool_name(self) -> str:
        """The folder's tool name (`email_agent`)."""
        return folder_name(self.tool)

    @property
    def action(self) -> str:
        """The action's name (`send`; an MCP server's tool as the server names it)."""
        return action_name(self.tool)


def find_folder(loaded: Sequence[LoadedTool], name: str, *, settings: Settings) -> LoadedTool:
    """The loaded folder `name` means (any form `folders.naming` reads); a UserError saying why not."""
    try:
        folder = find_in_tree(Discovery(nodes=_nodes(loaded)), name)
    except UserError:  # not among the loaded folders: the folders on disk say why
        folder = find_in_tree(discover_tree(settings.sub_graphs_dir), name)
    found = _loaded(loaded, folder.key)
    if found is not None:
        return found
    if folder.config.mcp is not None and approved_definition(ApprovalStore.of(settings), folder.key) is None:
        raise UserError(SERVER_UNDECIDED.format(path=short_path(folder)))
    reason = NOT_LOADED if _loaded_above(loaded, folder) else NOT_APPROVED
    raise UserError(reason.format(path=short_path(folder)))


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
        if action_name(tool) == action:
            return Address(folder, tool)
    names = ", ".join(map(action_name, tools))
    raise UserError(NOT_AN_ACTION.format(tool=folder.folder.name, action=action, actions=names))


def actions_of(folder: LoadedTool) -> list[Runnable]:
    """The folder's own actions, or its MCP server's tools (an agent's `ask` is not one: it
    runs the agent's model)."""
    return [tool for tool in folder.langchain if isinstance(tool, Runnable)]


def check_approved(reviewed: Reviewed, name: str) -> ToolFolder:
    """The folder `name` means, if it and every folder above it are approved; else a UserError.

    Reads the approvals only: nothing of the folder is imported.
    """
    folder = find_in_tree(reviewed.tree, name)
    for key in lineage(folder):
        if key not in reviewed.approved:
            above = find_in_tree(reviewed.tree, key)
            raise UserError(NOT_APPROVED.format(path=short_path(above)))
    return folder


def _nodes(loaded: Sequence[LoadedTool]) -> list[FolderNode]:
    """The loaded folders as a folder tree."""
    return [FolderNode(folder.folder, _nodes(folder.children)) for folder in loaded]


def _loaded(loaded: Sequence[LoadedTool], key: str) -> LoadedTool | None:
    """The loaded folder whose key is `key`, at any level."""
    for folder in loaded:
        if folder.folder.key == key:
            return folder
        if key.startswith(folder.folder.key + "/"):
            return _loaded(folder.children, key)
    return None


def _loaded_above(loaded: Sequence[LoadedTool], folder: ToolFolder) -> bool:
    """Whether the folders above `folder` are loaded (so it was approved, but did not load)."""
    parents = lineage(folder)[:-1]
    return all(_loaded(loaded, key) is not None for key in parents)
