"""Imports an approved tool folder's entry point and checks its class against the contract.

Only ever called for approved folders: this is where a folder's code first runs,
from the sources that were hashed (see `importer`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType

from pydantic import ValidationError

from orchestrator.errors import validation_problems
from orchestrator.tools.base import Tool
from orchestrator.tools.discovery import ToolFolder
from orchestrator.tools.hashing import SourceFile
from orchestrator.tools.importer import import_folder, package_name

ACTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_FUNCTION_NAME = 64  # what OpenAI-style APIs accept for a tool's name


class ToolLoadError(Exception):
    """An approved folder whose code cannot be used; the message says why."""


def import_tool(folder: ToolFolder, *, sources: Mapping[str, SourceFile] | None = None) -> Tool:
    """Import the folder's entry point and build its tool from `tool_config.yaml`.

    `sources` are the files its package may import (its own, by default; see
    `registry.visible_sources` for those of its approved sub-tools too).
    """
    module = _import_entry_point(folder, folder.sources if sources is None else sources)
    cls = _tool_class(module, folder)
    config = folder.config
    try:
        tool = cls(
            name=config.name,
            description=config.description,
            version=config.version,
            config=config.config,
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
    except Exception as error:  # any failure of foreign code is this folder's problem only
        raise ToolLoadError(
            f"entry point {folder.config.entry_file} failed to import: {type(error).__name__}: {error}"
        ) from None


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
        if not ACTION_NAME.match(name) or len(f"{tool.name}_{name}") > MAX_FUNCTION_NAME:
            raise ToolLoadError(
                f"action {name!r}: use lowercase letters, digits and _; "
                f"'{tool.name}_{name}' must fit in {MAX_FUNCTION_NAME} characters"
            )
