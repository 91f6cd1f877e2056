"""`tools show`'s actions of a folder that runs in its sandboxed process: asked of the process.

Its code never runs in this one: the process is started as a chat starts it (held by
the folder's sandbox, sent the folder as approved), asked for its actions, and ended.
They are shown as the model gets them: the folder's scope and the author's and the
configuration's sensitivity marks, by the same functions the real tools use.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from orchestrator.cli.tool_show_actions import Json, schema_action
from orchestrator.errors import ConfigError, ToolLoadError
from orchestrator.folders.sensitivity import BY_AUTHOR, SensitivityRules, marked_actions
from orchestrator.folders.tool_names import qualified_name

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder
    from orchestrator.settings import Settings
    from orchestrator.sources.isolated.process import Action


def held_actions(settings: Settings, folder: ToolFolder) -> tuple[list[Json] | None, str | None]:
    """The actions of `folder`'s process, or why they cannot be shown."""
    try:
        actions = _asked(settings, folder)
        return _shown(actions, settings, folder), None
    except (ToolLoadError, ConfigError) as error:  # a start would skip it, saying the same
        return None, f"cannot load: {error}"


def _asked(settings: Settings, folder: ToolFolder) -> list[Action]:
    from orchestrator.sources.isolated.process import FolderProcesses
    from orchestrator.sources.level_loading import tool_data_dir

    processes = FolderProcesses(data_dir=settings.data_dir, require_sandbox=settings.require_sandbox)
    process = processes.process(folder, tool_data=tool_data_dir(settings.data_dir, folder.key))
    try:
        return process.start_now()
    finally:
        asyncio.run(processes.close())


def _shown(actions: list[Action], settings: Settings, folder: ToolFolder) -> list[Json]:
    from orchestrator.sources.mcp.definitions import ToolDefinition
    from orchestrator.sources.mcp.tool_scope import json_scopes

    config = folder.config
    definitions = {
        a.name: ToolDefinition(name=a.name, description=a.description, inputSchema=dict(a.schema))
        for a in actions
    }
    scopes = json_scopes(config.name, definitions, config.parameters)
    authored = {a.name: BY_AUTHOR for a in actions if a.sensitive}
    marks = marked_actions(config.name, config, known=definitions.keys(), marks=authored)
    rules = SensitivityRules.of(settings.sensitive_words)
    shown: list[Json] = []
    for name, definition in definitions.items():
        called = qualified_name(config.name, name)
        metadata = {"requires_approval": config.requires_approval, "sensitive": marks.get(name)}
        shown.append(schema_action(definition, called, scopes.get(name), rules.why(called, metadata)))
    return shown
