"""`tools show` for an MCP server folder: how it is launched or reached, and its pinned tools.

The server is never started here: its tools are those of the definition the
person approved at a start (pinned in the approval store), with the scope and
sensitivity the real tools get from the same functions. Its environment
variables and headers are named and said to be set or not; their values are
never read into the report. An MCP server runs no model and gets no database
of ours, so neither is shown.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli.tool_show_actions import schema_action
from orchestrator.errors import ToolLoadError
from orchestrator.folders.sensitivity import SensitivityRules
from orchestrator.settings import hide_passwords
from orchestrator.sources.mcp.pins import pinned
from orchestrator.terminal.text import display_path, shown

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.folders.approvals import ApprovalStore, Pin
    from orchestrator.folders.discovery import ToolFolder
    from orchestrator.folders.mcp_config import McpServerConfig
    from orchestrator.settings import Settings
    from orchestrator.sources.mcp.definitions import ServerDefinition

Json = dict[str, object]

DIGEST_CHARS = 12  # of the pinned digest, in the text (all of it in --json)
APPROVED, DENIED, UNDECIDED = "approved", "denied", "undecided"
NOT_KNOWN = "not known yet (the server is not started here): listed once a start pins them"
NOT_OFFERED = "none offered: the server's tool definitions were denied"
TRANSPORTS = {"stdio": "stdio", "streamable_http": "streamable HTTP"}


def mcp_report(settings: Settings, store: ApprovalStore, folder: ToolFolder) -> Json:
    """What `tools show` reports of an MCP server folder beyond what every folder has."""
    server = folder.config.mcp
    assert server is not None, "an MCP server folder"
    found = pinned(store, folder.key)
    actions, note = _actions(found, settings, folder)
    return {
        "kind": "mcp",
        "agent": False,
        "yaml_only": False,
        "model": None,
        "database": None,
        "instructions": None,
        "mcp": {**_launch(server, folder.path), "definitions": _definitions(found, server)},
        "actions": actions,
        "actions_note": note,
    }


# --- resolving ---------------------------------------------------------------------------


def _launch(server: McpServerConfig, folder: Path) -> Json:
    """How the server is started or reached: variable names and whether each is set."""
    stdio = server.command is not None
    return {
        "transport": server.transport,
        "command": server.command,
        "args": list(server.args),
        "cwd": str(folder / server.cwd if server.cwd else folder) if stdio else None,
        "url": hide_passwords(server.url) if server.url else None,
        "env": _variables(server.env),
        "headers": _variables(server.headers),
        "startup_timeout_seconds": server.startup_timeout_seconds,
    }


def _variables(names: Mapping[str, str]) -> list[Json]:
    # Set or not as the server's start reads them: from this process's environment only.
    return [
        {"name": key, "variable": variable, "set": variable in os.environ}
        for key, variable in names.items()
    ]


def _definitions(found: tuple[Pin, ServerDefinition] | None, server: McpServerConfig) -> Json:
    """Where the server's tool definitions stand with the person."""
    if found is None:
        return {"status": UNDECIDED, "digest": None, "launch_changed": False, "server_info": None}
    pin, definition = found
    return {
        "status": APPROVED if pin.approved else DENIED,
        "digest": pin.digest,
        # Pinned for another launch: the next start sees another digest and asks again.
        "launch_changed": definition.launch != server.launch(),
        "server_info": definition.server_info,
    }


def _actions(
    found: tuple[Pin, ServerDefinition] | None, settings: Settings, folder: ToolFolder
) -> tuple[list[Json] | None, str | None]:
    """The approved definition's tools as the model gets them; else why there are none."""
    if found is None:
        return None, NOT_KNOWN
    pin, definition = found
    if not pin.approved:
        return None, NOT_OFFERED
    # The MCP SDK and LangChain load with it: only when there are tools to show.
    from orchestrator.folders.tool_names import qualified_name
    from orchestrator.sources.mcp.marks import check_config

    config = folder.config
    try:
        scopes, marks = check_config(config, definition)
    except ToolLoadError as error:  # startup skips the server, saying the same
        return None, f"cannot load: {error}"
    rules = SensitivityRules.of(settings.sensitive_words)
    actions = []
    for tool in definition.tools.values():
        name, mark = qualified_name(config.name, tool.name), marks.get(tool.name)
        # What the approval gate reads of the real tool's metadata (see `sources.mcp.tool`).
        metadata = {"requires_approval": config.requires_approval, "sensitive": mark}
        actions.append(schema_action(tool, name, scopes.get(tool.name), rules.why(name, metadata)))
    return actions, None


# --- printing ----------------------------------------------------------------------------


def kind_lines(server: Json) -> list[str]:
    """The `kind:` line of an MCP server folder and how it is launched or reached."""
    lines = [f"  kind: MCP server over {TRANSPORTS.get(str(server['transport']), '?')}"]
    if server["command"] is not None:
        command = shlex.join([str(server["command"]), *_strings(server["args"])])
        lines.append(f"    runs: {shown(command)}")
        lines.append(f"    in: {shown(display_path(Path(str(server['cwd']))))}")
    else:
        lines.append(f"    connects to: {shown(str(server['url']))}")
    lines.extend(_variable_line("env", entry) for entry in _entries(server["env"]))
    lines.extend(_variable_line("header", entry) for entry in _entries(server["headers"]))
    return lines


def definitions_line(report: Json) -> str:
    """Where the server's tool definitions stand: approved (and pinned), denied, undecided."""
    server = report["mcp"]
    assert isinstance(server, dict)
    definitions = server["definitions"]
    status = definitions["status"]
    if status == UNDECIDED:
        ready = report["status"] == APPROVED and not report["not_loaded_because"]
        when = "at the next start" if ready else "at the next start once the folder is approved"
        return f"  tool definitions: not decided yet: asked {when}"
    text = (
        f"approved (pinned digest {str(definitions['digest'])[:DIGEST_CHARS]}…)"
        if status == APPROVED
        else "denied"
    )
    if definitions["launch_changed"]:
        text += "; how it is launched changed since: asked again at the next start"
    return f"  tool definitions: {text}"


def _variable_line(what: str, entry: Json) -> str:
    state = "set" if entry["set"] else "not set"
    return f"    {what} {shown(str(entry['name']))}: from {shown(str(entry['variable']))} ({state})"


def _entries(value: object) -> list[Json]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []
