"""`orchestrator tools show NAME`: a tool folder's resolved configuration, without its secrets.

The level is resolved as startup resolves it (see `levels`), but nothing is
built: no model, no database connection. An API key or a database URL is named
by its variable and said to be set or not; a URL's password is masked; fixed
parameter values and `config:` values are never printed. The folder's code is
imported (to list its actions) only when the folder is approved, as startup
would; a YAML-only agent has none to import, and an MCP server's tools are
those of its pinned definition (see `tool_show_mcp`): it is never started here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from orchestrator.cli.common import out
from orchestrator.cli.tool_show_actions import action_lines, folder_actions
from orchestrator.cli.tool_show_held import held_actions
from orchestrator.cli.tool_show_mcp import definitions_line, kind_lines, mcp_report
from orchestrator.cli.tool_show_sandbox import sandbox_lines, sandbox_report
from orchestrator.errors import ToolLoadError
from orchestrator.folders.approvals import ApprovalStore, Status
from orchestrator.folders.discovery import Discovery, FolderNode, ToolFolder
from orchestrator.folders.isolation import in_process
from orchestrator.folders.level_view import ORCHESTRATOR, LevelView, Sourced, describe_level
from orchestrator.levels import LIMIT_NAMES
from orchestrator.llm.endpoints import model_endpoint
from orchestrator.settings import env_name, env_value, hide_passwords
from orchestrator.terminal.text import display_path, one_line, shown
from orchestrator.usage.money import usd

if TYPE_CHECKING:
    from orchestrator.folders.scope import ActionScope
    from orchestrator.level_overrides import DatabaseOverride
    from orchestrator.settings import Settings
    from orchestrator.tools.base import Tool

YAML_ONLY = " (no Python: tool_config.yaml only)"
INSTRUCTION_LINES = 3  # of the instructions, each cut to LINE_CHARS: the rest is in --json
LINE_CHARS = 120
Json = dict[str, object]
STATE_TEXT = {  # what each `state:` means, for people (see docs/folders.md)
    "local": "a fresh conversation at each call",
    "parent": "its caller's recent conversation too, within a quarter of its window",
    "standalone": "its own conversation with each user, kept from call to call "
    "(in its level's database; without storage, in memory)",
}
T = TypeVar("T")  # the value of a setting shown with where it came from


@dataclass(frozen=True)
class Loaded:
    """The folder's tool and its actions' scopes, if its code could be looked at; else why not."""

    tool: Tool | None
    scopes: dict[str, ActionScope] | None = None
    note: str | None = None
    actions: list[Json] | None = None  # a held folder's, as its process gave them


def folder_report(
    settings: Settings, tree: Discovery, store: ApprovalStore, folder: ToolFolder
) -> Json:
    """Everything `tools show` prints about `folder`, as JSON-ready data (no secret values)."""
    chain = _chain(tree.nodes, folder)
    assert chain is not None, "the folder comes from this tree"
    view = describe_level(settings, [node.folder.config for node in chain])
    report: Json = {
        "name": folder.name,
        "key": folder.key,
        "version": folder.config.version,
        "path": str(folder.path),
        "status": str(store.status(folder)),
        "not_loaded_because": _blocked_by(chain[:-1], store),
        "limits": {name: _sourced(view.limits[name], folder.name) for name in LIMIT_NAMES},
        "log_level": _sourced(view.log_level, folder.name),
        # A call of the folder is made, and timed, at the level above it.
        "calls": _calls(folder, describe_level(settings, [node.folder.config for node in chain[:-1]])),
        "config_keys": sorted(folder.config.config),
        "remote_config": _remote(folder),
        "sandbox": sandbox_report(settings, folder),
    }
    if folder.config.mcp is not None:
        return {**report, **mcp_report(settings, store, folder)}
    loaded = _load(chain, store, settings)
    agent = _is_agent(folder, loaded)
    tool, scopes = loaded.tool, loaded.scopes or {}
    actions = loaded.actions if tool is None else folder_actions(tool, scopes, settings, folder)
    return {
        **report,
        "kind": folder.config.kind,
        "agent": agent,
        "yaml_only": _yaml_only(folder),
        "model": _model(view, settings, folder.name) if agent is not False else None,
        "context_tokens": _window(view, folder.name) if agent is not False else None,
        "database": _database(view.database, settings, folder.name),
        "instructions": _instructions(folder, loaded) if agent else None,
        "state": _state(folder) if agent is not False else None,
        "actions": actions,
        "actions_note": loaded.note,
    }


def print_report(report: Json, *, as_json: bool) -> None:
    """Print `report` for a person (escaped: most of it comes from the folder) or as JSON."""
    if as_json:
        print(json.dumps(report))  # ASCII: no raw control characters
        return
    server = report.get("mcp")
    lines = [
        f"[bold]{shown(str(report['name']))}[/bold] {shown(str(report['version']))}",
        *(kind_lines(server) if isinstance(server, dict) else [_kind_text(report)]),
        f"  path: {_path_text(report['path'])}",
        f"  status: {report['status']}{_blocked_text(report)}",
        *_remote_lines(report.get("remote_config")),
        *([definitions_line(report)] if server else _model_and_database_lines(report)),
        "  limits (of the calls made at its level, below it):",
        *(
            f"    {name}: {_value(entry['value'])} ({_origin_text(entry)})"
            for name, entry in _entries(report["limits"])
        ),
        f"  log level: {_log_level_text(report['log_level'])}",
        *_window_lines(report.get("context_tokens")),
        *_state_lines(report.get("state")),
        _calls_text(report["calls"]),
        *sandbox_lines(report.get("sandbox")),
        *_instruction_lines(report.get("instructions")),
        *_config_lines(report["config_keys"]),
        *action_lines(report),
    ]
    for line in lines:
        out.print(line, highlight=False)


def _remote(folder: ToolFolder) -> Json | None:
    remote = folder.remote
    if remote is None:
        return None
    return {
        "url": remote.url,
        "source": str(remote.source),
        "fetched_at": remote.fetched_at.isoformat() if remote.fetched_at else None,
        "reason": remote.reason,
        "approval_covers": sorted(remote.covered or {}),  # names: `config:` values stay unsaid
        "line": remote.whence,
    }


def _remote_lines(remote: object) -> list[str]:
    return [f"  {shown(str(remote['line']))}"] if isinstance(remote, dict) else []


def _path_text(path: object) -> str:
    return shown(display_path(Path(str(path))))


# --- resolving ---------------------------------------------------------------------------


def _chain(nodes: list[FolderNode], folder: ToolFolder) -> list[FolderNode] | None:
    """The nodes from the top level down to `folder`'s."""
    for node in nodes:
        if node.folder is folder:
            return [node]
        below = _chain(node.children, folder)
        if below is not None:
            return [node, *below]
    return None


def _blocked_by(above: list[FolderNode], store: ApprovalStore) -> str | None:
    for node in above:
        status = store.status(node.folder)
        if status != Status.APPROVED:
            return f"{node.folder.name} above it is {status}"
    return None


def _load(chain: list[FolderNode], store: ApprovalStore, settings: Settings) -> Loaded:
    from orchestrator.errors import ConfigError
    from orchestrator.folders.loader import load_tool, visible_sources
    from orchestrator.folders.scope import resolve_scopes

    node = chain[-1]
    status = store.status(node.folder)
    if status != Status.APPROVED and not _yaml_only(node.folder):
        return Loaded(None, note=f"not shown: the folder is {status}; its code runs once approved")
    if in_process(node.folder):  # its code runs only in its held process, never here
        actions, note = held_actions(settings, node.folder)
        return Loaded(None, note=note, actions=actions)
    approved = {n.folder.key for n in _walk(node) if store.status(n.folder) == Status.APPROVED}
    try:
        tool = load_tool(node.folder, sources=visible_sources(node, approved))
        return Loaded(tool, resolve_scopes(tool, node.folder.config.parameters))
    except (ToolLoadError, ConfigError) as error:  # startup would skip it, saying the same
        return Loaded(None, note=f"cannot load: {error}")


def _yaml_only(folder: ToolFolder) -> bool:
    """A `kind: agent` folder with no entry point: it has no code to run."""
    return folder.config.entry_optional and folder.entry not in folder.sources


def _walk(node: FolderNode) -> list[FolderNode]:
    return [node, *(below for child in node.children for below in _walk(child))]


def _is_agent(folder: ToolFolder, loaded: Loaded) -> bool | None:
    """Whether the folder is an agent; None when unknown (its code was not looked at)."""
    if loaded.tool is not None:
        from orchestrator.tools.agent import AgentTool

        return isinstance(loaded.tool, AgentTool)
    return True if folder.config.kind == "agent" else None


def _sourced(entry: Sourced[T], name: str) -> Json:
    return {"value": entry.value, "origin": entry.origin, "inherited": entry.origin != name}


def _model(view: LevelView, settings: Settings, name: str) -> Json:
    endpoint = model_endpoint(view.model.value, settings)
    key = endpoint.api_key_env
    orchestrators = endpoint.shared or view.model.value is None
    return {
        "model": endpoint.model,
        "base_url": hide_passwords(endpoint.base_url) if endpoint.base_url else None,
        "api_key_env": key,
        # The orchestrator's key is named only when the settings hold it (environment or .env).
        "api_key_set": key is not None and (orchestrators or bool(env_value(key))),
        "temperature": endpoint.temperature,
        # Each level's own streaming switch, else the settings' one.
        "streaming": settings.model_streaming if endpoint.streaming is None else endpoint.streaming,
        "origin": view.model.origin,
        "inherited": view.model.origin != name,
        "tool_result_model": (
            None if view.tool_result_model is None else _sourced(view.tool_result_model, name)
        ),
    }


def _database(entry: Sourced[DatabaseOverride | None], settings: Settings, name: str) -> Json:
    override = entry.value
    described: Json = {"origin": entry.origin, "inherited": entry.origin != name}
    if override is None:
        url = settings.database_url
        return {
            **described,
            "url": hide_passwords(url, url) if url else None,
            "url_env": env_name("database_url") if url else None,
            "url_env_set": bool(url),
            "embedded": None if url else str(settings.data_dir / "pgdata"),
        }
    url = override.url or (env_value(override.url_env) if override.url_env else None)
    return {
        **described,
        "url": hide_passwords(url, url) if url else None,
        "url_env": override.url_env,
        "url_env_set": bool(url) if override.url_env else None,
        "app_url_env": override.app_url_env,
        "app_url_env_set": bool(env_value(override.app_url_env)) if override.app_url_env else None,
        "embedded": None,
    }


def _instructions(folder: ToolFolder, loaded: Loaded) -> Json:
    """The agent's system prompt as its model gets it, and where it comes from."""
    from orchestrator.tools.agent import AgentTool

    config = folder.config
    agent = loaded.tool if isinstance(loaded.tool, AgentTool) else None
    if config.instructions is not None:
        # Filled in as startup fills it, without the folder's code: only {name}, {description}.
        agent = agent or AgentTool(name=config.name, description=config.description)
        return {"text": agent.system_prompt(config.instructions), "origin": "tool_config.yaml"}
    if agent is not None:
        return {"text": agent.system_prompt(), "origin": f"class {type(agent).__name__}"}
    return {"text": None, "origin": "the agent class (its code is not loaded)"}


def _state(folder: ToolFolder) -> Json:
    """The agent's `state:` (never inherited: each agent folder says its own, else `local`)."""
    own = "state" in folder.config.model_fields_set
    return {"value": folder.config.state, "origin": "tool_config.yaml" if own else "default"}


def _state_lines(state: object) -> list[str]:
    if not isinstance(state, dict):
        return []
    value = str(state["value"])
    return [f"  state: {value}, {STATE_TEXT.get(value, '')} ({state['origin']})"]


def _calls(folder: ToolFolder, caller: LevelView) -> Json:
    """How calls of the folder's actions run (its own `timeout_seconds`, else the caller's level's)."""
    config = folder.config
    own = "timeout_seconds" in config.model_fields_set
    limit = caller.limits["timeout_seconds"]
    return {
        "timeout_seconds": config.timeout_seconds if own else limit.value,
        "timeout_from": "tool_config.yaml" if own else "limits.timeout_seconds",
        "timeout_origin": folder.name if own else limit.origin,
        "max_retries": config.max_retries,
        "background": config.background,
        "idempotent": config.idempotent,
        "max_cost_usd": config.max_cost_usd,
        "cache": config.cache.model_dump() if config.cache is not None else None,
    }


# --- printing ----------------------------------------------------------------------------


def _entries(mapping: object) -> list[tuple[str, Json]]:
    return list(mapping.items()) if isinstance(mapping, dict) else []


def _origin_text(entry: Json) -> str:
    if not entry["inherited"]:
        return "local"
    origin = str(entry["origin"])
    if origin == ORCHESTRATOR:
        return "inherited from the orchestrator"
    return f"inherited from {shown(origin)}"


def _value(value: object) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _kind_text(report: Json) -> str:
    return f"  kind: {report['kind']}{YAML_ONLY if report['yaml_only'] else ''}"


def _model_and_database_lines(report: Json) -> list[str]:
    return [
        *_model_lines(report.get("model"), maybe=report["agent"] is None),
        *_database_lines(report["database"]),
    ]


def _blocked_text(report: Json) -> str:
    blocked = report.get("not_loaded_because")
    return f" (not loaded: {shown(str(blocked))})" if blocked else ""


def _model_lines(model: object, *, maybe: bool) -> list[str]:
    if not isinstance(model, dict):
        return ["  model: none (a tool, not an agent: it runs no model)"]
    label = "model (if it is an agent)" if maybe else "model"
    lines = [f"  {label}: {shown(str(model['model']))} ({_origin_text(model)})"]
    if model["base_url"]:
        lines.append(f"    base_url: {shown(str(model['base_url']))}")
    if model["api_key_env"]:
        state = "set" if model["api_key_set"] else "not set"
        lines.append(f"    api key: from {shown(str(model['api_key_env']))} ({state})")
    if model["temperature"] is not None:
        lines.append(f"    temperature: {model['temperature']}")
    if model.get("streaming") is False:
        lines.append("    streaming: off (whole replies)")
    after_tools = model.get("tool_result_model")
    if isinstance(after_tools, dict) and after_tools["value"]:
        lines.append(
            f"    after tool results: {shown(str(after_tools['value']))} ({_origin_text(after_tools)})"
        )
    return lines


def _database_lines(database: object) -> list[str]:
    assert isinstance(database, dict)
    origin = _origin_text(database)
    if database.get("embedded"):
        where = f"the embedded server in {_path_text(database['embedded'])}"
    elif database.get("url"):
        where = shown(str(database["url"]))
    else:
        where = "no URL"
    if database.get("url_env"):
        state = "set" if database.get("url_env_set") else "not set"
        where = f"{where} (from {shown(str(database['url_env']))}, {state})"
    lines = [f"  database: {where} ({origin})"]
    if database.get("app_url_env"):
        state = "set" if database.get("app_url_env_set") else "not set"
        lines.append(f"    application login: from {shown(str(database['app_url_env']))} ({state})")
    return lines


def _calls_text(calls: object) -> str:
    assert isinstance(calls, dict)
    flags = [name for name in ("background", "idempotent") if calls[name]]
    if calls.get("max_cost_usd") is not None:
        flags.append(f"at most {usd(float(calls['max_cost_usd']))} a call")
    flags += _cache_flags(calls.get("cache"))
    return (
        f"  calls of it: timeout {_value(calls['timeout_seconds'])} s ({_timeout_origin(calls)}), "
        f"max_retries {calls['max_retries']}{''.join(f', {flag}' for flag in flags)}"
    )


def _cache_flags(cache: object) -> list[str]:
    """`results reused 300 s`, `results of lookup reused 60 s`: what `cache:` says."""
    if not isinstance(cache, dict):
        return []
    flags = [f"results reused {cache['ttl_seconds']} s"] if cache.get("ttl_seconds") else []
    actions = cache.get("actions")
    for name, own in actions.items() if isinstance(actions, dict) else ():
        flags.append(f"results of {shown(str(name))} reused {own['ttl_seconds']} s")
    return flags


def _timeout_origin(calls: Json) -> str:
    if calls["timeout_from"] == "tool_config.yaml":
        return "its tool_config.yaml"
    origin = str(calls["timeout_origin"])
    owner = "the orchestrator's" if origin == ORCHESTRATOR else f"{shown(origin)}'s"
    return f"{owner} limits.timeout_seconds, the level that calls it"


def _window(view: LevelView, name: str) -> Json | None:
    """The window an agent's model gets when its profile gives none, and where it is set."""
    return _sourced(view.context_tokens, name) if view.context_tokens is not None else None


def _window_lines(entry: object) -> list[str]:
    if not isinstance(entry, dict):
        return []
    return [
        f"  context window: the model profile's max_input_tokens, else {entry['value']} tokens "
        f"({_origin_text(entry)})"
    ]


def _log_level_text(entry: object) -> str:
    assert isinstance(entry, dict)
    return f"{entry['value']} ({_origin_text(entry)})"


def _instruction_lines(instructions: object) -> list[str]:
    if not isinstance(instructions, dict):
        return []
    text = instructions.get("text")
    if not isinstance(text, str):
        return [f"  instructions: {shown(str(instructions['origin']))}"]
    lines = text.strip().splitlines()
    shown_lines = [f"    {shown(one_line(line, LINE_CHARS))}" for line in lines[:INSTRUCTION_LINES]]
    more = len(lines) - INSTRUCTION_LINES
    if more > 0:
        shown_lines.append(f"    … ({more} more line{'s' if more > 1 else ''})")
    return [f"  instructions (from {shown(str(instructions['origin']))}):", *shown_lines]


def _config_lines(keys: object) -> list[str]:
    if not isinstance(keys, list) or not keys:
        return []
    return [f"  config: {', '.join(shown(str(k)) for k in keys)} (values not shown)"]
