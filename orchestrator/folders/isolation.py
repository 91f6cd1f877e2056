"""Where a folder's code runs: a sandboxed process of its own, or inline in the orchestrator.

- an MCP server started over stdio: a process, unless `isolation: inline`;
  one reached by URL runs wherever it runs;
- a Python tool folder: a process, unless `isolation: inline`, or it is shipped
  with the orchestrator, as shipped (see `shipped`): those run inline, and
  their `sandbox:` section says what they use, for the person to see;
- an agent (`kind: agent`, or a folder with tool folders of its own): inline,
  always: its graph is part of the orchestrator's; each tool folder below it
  is held as above. (An `AgentTool` found in a held process refuses to load.)

Inline is the orchestrator's process, with all the person can reach: chosen,
it is said in red at approval (see `terminal.folder_reach`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from orchestrator.folders.discovery import child_folders
from orchestrator.folders.shipped import is_shipped

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder

Why = Literal["process", "chosen", "shipped", "agent", "remote"]


def in_process(folder: ToolFolder) -> bool:
    """True when the folder's code runs in a sandboxed process of its own."""
    return isolation_of(folder) == "process"


def isolation_of(folder: ToolFolder) -> Why:
    """Held in a `process`; else why it is not: `chosen` (isolation: inline), `shipped`,
    `agent`, or `remote` (an MCP server reached by URL)."""
    config = folder.config
    if config.mcp is not None:
        if config.mcp.command is None:
            return "remote"
        return "chosen" if config.sandbox.isolation == "inline" else "process"
    if config.kind == "agent" or child_folders(folder.path):
        return "agent"
    if is_shipped(folder):
        return "shipped" if config.sandbox.isolation != "process" else "process"
    return "chosen" if config.sandbox.isolation == "inline" else "process"


def unconfined_by_choice(folder: ToolFolder) -> bool:
    """True when code not shipped with the orchestrator runs inline: `isolation: inline`, or
    an agent's own Python (said in red wherever it is shown)."""
    why = isolation_of(folder)
    return why == "chosen" or (why == "agent" and bool(folder.sources) and not is_shipped(folder))


def needs_database(folder: ToolFolder) -> bool:
    """True for a folder with tables of its own (`migrations/`) or a database (`db:`): a
    process of its own cannot reach the database, so it runs inline only when it says so."""
    return bool(folder.migrations) or folder.config.db.local
