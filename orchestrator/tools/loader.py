"""Imports an approved tool folder's entry point and checks its class against the contract.

Only ever called for approved folders: this is where a folder's code first runs.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from types import ModuleType

from pydantic import ValidationError

from orchestrator.errors import validation_problems
from orchestrator.tools.base import Tool
from orchestrator.tools.discovery import ToolFolder

PACKAGE = "orchestrator_sub_graphs"
ACTION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_FUNCTION_NAME = 64  # what OpenAI-style APIs accept for a tool's name


class ToolLoadError(Exception):
    """An approved folder whose code cannot be used; the message says why."""


def import_tool(folder: ToolFolder) -> Tool:
    """Import the folder's entry point and build its tool from `tool_config.yaml`."""
    module = _import_entry_point(folder)
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


def _import_entry_point(folder: ToolFolder) -> ModuleType:
    # Each folder becomes a package of its own, so its modules may import their
    # siblings relatively (`from .helpers import x`) without touching sys.path.
    package = f"{PACKAGE}.{_identifier(folder.key)}"
    _ensure_package(PACKAGE, path=[])
    _ensure_package(package, path=[str(folder.path)])
    entry = folder.path / folder.config.entry_file
    name = f"{package}.{_identifier(entry.stem)}"
    spec = importlib.util.spec_from_file_location(name, entry)
    if spec is None or spec.loader is None:
        raise ToolLoadError(f"cannot import {entry}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # any failure of foreign code is this folder's problem only
        del sys.modules[name]
        raise ToolLoadError(
            f"entry point {folder.config.entry_file} failed to import: {type(error).__name__}: {error}"
        ) from None
    return module


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _ensure_package(name: str, *, path: list[str]) -> None:
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = path
        sys.modules[name] = package


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
