"""What a folder hands out, for its approval question: endpoints and the variables it takes.

A YAML-only agent may name any variable as its model's key and any server as
its model: approving it sends that variable's value there, with the person's
requests. So the question shows every endpoint and every variable name (never
a value), and says so when a variable not named like a key is sent as one.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from pydantic import JsonValue

from orchestrator.folders.isolation import isolation_of, unconfined_by_choice
from orchestrator.folders.mcp_config import McpServerConfig
from orchestrator.folders.remote_config import shown_value
from orchestrator.folders.sandbox_config import SandboxConfig
from orchestrator.level_overrides import DatabaseOverride, ModelOverride
from orchestrator.sandbox.rules import Policy, unenforced
from orchestrator.terminal.text import display_path, one_line, shown

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder

KEYISH = re.compile(r"KEY|TOKEN|AUTH", re.IGNORECASE)
NOT_A_KEY = "[red]{variable} is not named like a key, yet its value is sent as one[/red]"
DESCRIPTION_CHARS = 500
INLINE_CHOSEN = "sandbox: none (isolation: inline): it runs with all you can reach"
INLINE_SHIPPED = "sandbox: none: shipped with the orchestrator, it runs inside it"
INLINE_AGENT = "sandbox: none: an agent's code runs inside the orchestrator, with all you can reach"


def describe_folder(folder: ToolFolder) -> str:
    """Name, version, description, capabilities and path of a tool folder (rich markup).

    Every part comes from the folder, so each is shown escaped, on a line of its own:
    nothing in a description can pass for the capabilities or the path.
    """
    capabilities = ", ".join(shown(c) for c in folder.config.capabilities) or "none declared"
    description = one_line(folder.config.description, DESCRIPTION_CHARS)
    server = folder.config.mcp
    if server is not None:  # approving it starts this: it is said before anything else
        what = server.url or " ".join([server.command or "", *server.args])
        capabilities += f"\n  MCP server: {'connects to' if server.url else 'runs'} {shown(what)}"
    lines = [*remote_lines(folder), *reach_lines(folder), *requirement_lines(folder)]
    reach = "".join(f"\n{line}" for line in lines)
    return (
        f"[bold]{shown(folder.name)}[/bold] {shown(folder.config.version)}\n"
        f"  {shown(description)}\n"
        f"  capabilities: {capabilities}{reach}\n"
        f"  path: {shown(display_path(folder.path))}"
    )


def remote_lines(folder: ToolFolder) -> list[str]:
    """Where its configuration comes from, and what of a remote copy approval covers."""
    remote = folder.remote
    if remote is None:
        return []
    lines = [f"  {shown(remote.whence)}"]
    for name, value in (remote.covered or {}).items():
        text = covered_text(name, value)
        lines.append(f"  [yellow]the remote copy sets {shown(name)}:[/yellow] {shown(text)}")
    return lines


def covered_text(name: str, value: JsonValue) -> str:
    """A covered part of a remote copy on one line (of `config:`, the names alone)."""
    if value is None:
        return "not set"
    return one_line(json.dumps(shown_value(name, value), sort_keys=True), DESCRIPTION_CHARS)


def requirement_lines(folder: ToolFolder) -> list[str]:
    """Its requirements.txt, each with what this environment has, and how to add what is missing."""
    from orchestrator.folders.requirements import read_requirements

    requirements = read_requirements(folder.requirements)
    if not requirements.needed and not requirements.unreadable:
        return []
    listed = ", ".join(shown(item.describe()) for item in requirements.needed) or "nothing"
    lines = [f"  requires (requirements.txt): {listed}"]
    if requirements.unreadable:
        lines.append(f"  [red]not requirements: {shown(', '.join(requirements.unreadable))}[/red]")
    if requirements.unmet:
        names = ", ".join(shown(item.name) for item in requirements.unmet)
        lines.append(
            f"  [yellow]missing from this environment: {names}; once approved, "
            f"`orchestrator tools install {shown(folder.name)}` installs them[/yellow]"
        )
    return lines


def reach_lines(folder: ToolFolder) -> list[str]:
    """Lines (rich markup) naming where the folder connects, which variables it reads, and
    where its code runs, with what it may touch."""
    config = folder.config
    lines = _model(config.llm) + _database(config.db)
    if config.mcp is not None:
        lines += _server(config.mcp)
    return lines + sandbox_lines(folder)


def sandbox_lines(folder: ToolFolder) -> list[str]:
    """Where its code runs: held (what it may touch, and the rules this machine will not
    enforce), or inline (in red when chosen; what it says it uses when shipped)."""
    why = isolation_of(folder)
    sandbox = folder.config.sandbox
    if why == "process":
        lines = _indented("sandbox: ", _reach(sandbox))
        missing = unenforced(Policy(read=[], write=[], connect=sandbox.connect))
        return lines + [f"  [red]not enforced on this machine: {shown(rule)}[/red]" for rule in missing]
    if why == "chosen":
        return [f"  [red]{INLINE_CHOSEN}[/red]", *_indented("it says it uses: ", _reach(sandbox))]
    if why == "shipped":
        return [f"  {INLINE_SHIPPED}", *_indented("it says it uses: ", _reach(sandbox))]
    if unconfined_by_choice(folder):  # an agent's own Python, not shipped
        return [f"  [red]{INLINE_AGENT}[/red]"]
    return []


def _indented(first: str, lines: list[str]) -> list[str]:
    return [f"  {first}{line}" if n == 0 else f"  {' ' * len(first)}{line}" for n, line in enumerate(lines)]


def _reach(sandbox: SandboxConfig) -> list[str]:
    reads = ", ".join(["the system", "its folder", "its program", *map(shown, sandbox.read)])
    writes = ", ".join(["its own data directory", *map(shown, sandbox.write)])
    ports = ", ".join(str(port) for port in sorted(set(sandbox.connect))) or "none"
    limits = f"{sandbox.memory_mb} MB of memory, {sandbox.max_files} open files"
    if sandbox.cpu_seconds is not None:
        limits += f", {sandbox.cpu_seconds} s of CPU"
    return [f"reads {reads}", f"writes {writes}", f"connects to TCP ports: {ports}", limits]


def _model(llm: ModelOverride) -> list[str]:
    if not llm.local or llm.model is None:
        return []
    where = llm.base_url or _default_endpoint(llm.model)
    lines = [f"  model: {shown(llm.model)} at {shown(where)}"]
    if llm.api_key_env:
        lines.append(f"  sends as its API key: ${shown(llm.api_key_env)} (to {shown(where)})")
        if not KEYISH.search(llm.api_key_env):
            lines.append("  " + NOT_A_KEY.format(variable=shown(llm.api_key_env)))
    elif not llm.base_url:
        lines.append("  sends as its API key: the provider's usual variable (as the orchestrator)")
    return lines


def _default_endpoint(model: str) -> str:
    provider = model.partition(":")[0] if ":" in model else "openai"
    if provider == "openai":
        return "the orchestrator's OpenAI endpoint (OPENAI_BASE_URL, or api.openai.com)"
    return f"{provider}'s default endpoint"


def _database(db: DatabaseOverride) -> list[str]:
    if not db.local:
        return []
    if db.url is not None:  # the host only: the URL may hold a password
        host = db.url.partition("@")[2].partition("/")[0] or "?"
        return [f"  database: its own, at {shown(host)}"]
    names = [name for name in (db.url_env, db.app_url_env) if name]
    return ["  database: its own, URL from " + ", ".join(f"${shown(n)}" for n in names)]


def _server(server: McpServerConfig) -> list[str]:
    lines = []
    given = {**server.env, **server.headers}
    what = "variable" if server.env else "header"
    for target, variable in given.items():
        lines.append(f"  hands its {what} {shown(target)} the value of ${shown(variable)}")
        if KEYISH.search(target) and not KEYISH.search(variable):
            lines.append("  " + NOT_A_KEY.format(variable=shown(variable)))
    if server.url is not None:
        lines.append(f"  connects to: {shown(server.url)}")
    return lines
