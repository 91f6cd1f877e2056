"""Imports an approved tool folder's entry point and checks its class against the contract.

Only ever called for approved folders: this is where a folder's code first runs,
from the sources that were hashed (see `importer`). A `kind: agent` folder
without an entry point runs no code of its own: it is a plain `AgentTool`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType

from pydantic import ValidationError

from orchestrator.errors import MissingPackageError, ToolLoadError, validation_problems
from orchestrator.folders.discovery import FolderNode, ToolFolder
from orchestrator.folders.hashing import SourceFile
from orchestrator.folders.importer import PACKAGE, import_folder, package_name
from orchestrator.folders.requirements import providing, read_requirements
from orchestrator.folders.tool_names import MAX_FUNCTION_NAME, fits
from orchestrator.install import pip_install
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.base import Tool

ACTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MISSING_REQUIREMENT = (
    "it imports {module}, from the package {requirement} of its requirements.txt, which is not "
    "installed here: `orchestrator tools install {name}` installs it"
)
MISSING_PACKAGE = (
    "it imports {module}, which is not installed here and not in its requirements.txt: "
    "install it ({install}), or ask the folder's author to list it there"
)


def load_tool(folder: ToolFolder, *, sources: Mapping[str, SourceFile] | None = None) -> Tool:
    """The folder's tool: from its entry point, or a plain `AgentTool` for a YAML-only agent.

    `kind: agent` asks for an `AgentTool`; `instructions` are for agents only.
    """
    config = folder.config
    if config.entry_optional and folder.entry not in folder.sources:
        return _build(AgentTool, folder)
    tool = import_tool(folder, sources=sources)
    if config.kind == "agent" and not isinstance(tool, AgentTool):
        raise ToolLoadError(f"kind: agent, but {type(tool).__name__} is not an AgentTool subclass")
    if config.instructions is not None and not isinstance(tool, AgentTool):
        raise ToolLoadError(
            f"instructions are for agents, and {type(tool).__name__} is not an AgentTool subclass"
        )
    return tool


def import_tool(folder: ToolFolder, *, sources: Mapping[str, SourceFile] | None = None) -> Tool:
    """Import the folder's entry point and build its tool from `tool_config.yaml`.

    `sources` are the files its package may import (its own, by default; see
    `visible_sources` for those of its approved sub-tools too).
    """
    module = _import_entry_point(folder, folder.sources if sources is None else sources)
    return _build(_tool_class(module, folder), folder)


def visible_sources(node: FolderNode, approved: set[str]) -> Mapping[str, SourceFile]:
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


def _build(cls: type[Tool], folder: ToolFolder) -> Tool:
    config = folder.config
    try:
        tool = cls(
            name=config.name,
            description=config.description,
            version=config.version,
            config={**config.config},
            capabilities=config.capabilities,
        )
    except ValidationError as error:
        raise ToolLoadError(f"{cls.__name__} rejects its config: {validation_problems(error)}") from None
    _check_actions(tool)
    return tool


def _import_entry_point(folder: ToolFolder, sources: Mapping[str, SourceFile]) -> ModuleType:
    try:
        return import_folder(
            package_name(folder.path), root=folder.path, sources=sources, entry=folder.entry
        )
    except ModuleNotFoundError as error:
        if error.name is None or error.name.startswith(PACKAGE):
            raise ToolLoadError(_failed(folder, error)) from None
        raise MissingPackageError(missing_package(folder, error.name)) from None
    except Exception as error:  # any failure of foreign code is this folder's problem only
        raise ToolLoadError(_failed(folder, error)) from None


def _failed(folder: ToolFolder, error: Exception) -> str:
    return f"entry point {folder.config.entry_file} failed to import: {type(error).__name__}: {error}"


def missing_package(folder: ToolFolder, module: str) -> str:
    """What to say of a folder whose code imports `module`, which this Python does not have."""
    needed = providing(module, read_requirements(folder.requirements))
    if needed is not None:
        return MISSING_REQUIREMENT.format(
            module=module, requirement=needed.requirement, name=folder.name
        )
    return MISSING_PACKAGE.format(module=module, install=pip_install(module.partition(".")[0]))


def _tool_class(module: ModuleType, folder: ToolFolder) -> type[Tool]:
    wanted = folder.config.class_name
    if wanted is not None:
        cls = getattr(module, wanted, None)
        if not (isinstance(cls, type) and issubclass(cls, Tool)):
            raise ToolLoadError(f"class_name {wanted!r} is not a Tool subclass in the entry point")
        return cls
    defined = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Tool) and value.__module__ == module.__name__
    ]
    if len(defined) != 1:
        names = ", ".join(sorted(c.__name__ for c in defined)) or "none"
        raise ToolLoadError(
            f"the entry point must define exactly one Tool subclass (found: {names}); "
            "or set class_name in tool_config.yaml"
        )
    return defined[0]


def _check_actions(tool: Tool) -> None:
    if not tool.actions:
        raise ToolLoadError(f"{type(tool).__name__} declares no actions (use @action)")
    for name in tool.actions:
        if not ACTION_NAME.match(name) or not fits(tool.name, name):
            raise ToolLoadError(
                f"action {name!r}: use lowercase letters, digits and _; "
                f"'{tool.name}_{name}' must fit in {MAX_FUNCTION_NAME} characters"
            )
