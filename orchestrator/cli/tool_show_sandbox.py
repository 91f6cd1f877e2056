"""`tools show`: the effective sandbox of a folder, its paths resolved as a start would now."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.folders.isolation import isolation_of, unconfined_by_choice
from orchestrator.folders.sandbox_config import data_directory, policy, private_environment
from orchestrator.sandbox import landlock
from orchestrator.sandbox.rules import unenforced
from orchestrator.terminal.text import display_path, shown

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder
    from orchestrator.settings import Settings

Json = dict[str, object]

INLINE = {
    "chosen": "none (isolation: inline): it runs inside the orchestrator's process, "
    "with all you can reach",
    "shipped": "none: shipped with the orchestrator, it runs inside its process",
    "agent": "none: an agent runs inside the orchestrator's process, with all you can reach",
    "remote": "none here: a remote server (url), which runs wherever it runs",
}


def sandbox_report(settings: Settings, folder: ToolFolder) -> Json:
    """Where the folder's code runs and, when held, what it may touch."""
    config = folder.config
    why = isolation_of(folder)
    if why != "process":
        section = config.sandbox
        declared = {"read": section.read, "write": section.write, "connect": section.connect}
        warn = unconfined_by_choice(folder)
        return {"held": False, "isolation": why, "note": INLINE[why], "warn": warn, "declared": declared}
    data = data_directory(settings.data_dir, folder.key)
    try:
        rules = policy(
            config.sandbox,
            folder=folder.path,
            data=data,
            command=_command(folder),
            settings=config.config,
        )
    except ConfigError as error:
        return {"held": True, "isolation": "process", "note": None, "problem": str(error)}
    if config.mcp is None:  # a Python folder's process: the worker's needs too
        from orchestrator.sources.isolated.process import child_policy
        from orchestrator.sources.level_loading import tool_data_dir

        rules = child_policy(rules, tool_data=tool_data_dir(settings.data_dir, folder.key))
    return {
        "held": True,
        "isolation": "process",
        "note": None,
        "problem": None,
        "abi": landlock.abi_version(),
        "read": rules.read,
        "listed": rules.listed,
        "write": rules.write,
        "connect": rules.connect,
        "memory_mb": rules.memory_mb,
        "cpu_seconds": rules.cpu_seconds,
        "max_files": rules.max_files,
        "environment": private_environment(data),
        "unenforced": unenforced(rules),
        "required": settings.require_sandbox,
    }


def _command(folder: ToolFolder) -> str | None:
    server = folder.config.mcp
    if server is None or server.command is None:
        return None
    try:
        connection = server.connection(folder=folder.path)
    except ConfigError:  # a variable not set: the command as written
        return server.command
    return connection["command"] if connection["transport"] == "stdio" else None


def sandbox_lines(report: object) -> list[str]:
    """The report's lines for a person (paths escaped: they come from the folder)."""
    if not isinstance(report, dict):
        return []
    if not report["held"]:
        return _inline_lines(report)
    if report["problem"]:
        return [f"  sandbox: cannot be resolved now: {shown(str(report['problem']))}"]
    abi = report["abi"]
    held = f"Landlock ABI {abi}" if abi else "resource limits only: no Landlock here"
    cpu = f"{report['cpu_seconds']} s of CPU" if report["cpu_seconds"] else "CPU unlimited"
    lines = [
        f"  sandbox: a process of its own, held ({held})",
        f"    reads: {_paths(report['read'])}",
        *([f"    lists (no files read): {_paths(report['listed'])}"] if report["listed"] else []),
        f"    writes: {_paths(report['write'])}",
        f"    connects to TCP ports: {', '.join(map(str, report['connect'])) or 'none'}",
        f"    limits: {report['memory_mb']} MB of memory, {cpu}, {report['max_files']} open files",
    ]
    environment = report["environment"]
    assert isinstance(environment, dict)
    lines += [f"    {name}: {_paths([value])}" for name, value in environment.items()]
    unenforced = report["unenforced"]
    assert isinstance(unenforced, list)
    for rule in unenforced:
        what = "refused to start" if report["required"] else "not enforced here"
        lines.append(f"    [red]{what}: {shown(str(rule))}[/red]")
    return lines


def _inline_lines(report: dict[str, object]) -> list[str]:
    """Not held: why (in red for code not shipped running inline), and what its section
    says it uses."""
    line = f"sandbox: {report['note']}"
    lines = [f"  [red]{line}[/red]" if report["warn"] else f"  {line}"]
    declared = report.get("declared")
    if isinstance(declared, dict) and any(declared.values()):
        ports = ", ".join(map(str, declared["connect"])) or "none"
        lines += [
            "    it says it uses (not enforced):",
            f"      reads: {_raw(declared['read'])}",
            f"      writes: {_raw(declared['write'])}",
            f"      connects to TCP ports: {ports}",
        ]
    return lines


def _raw(paths: object) -> str:
    """Paths as written in the section (not resolved: nothing holds it to them)."""
    items = paths if isinstance(paths, list) else []
    return ", ".join(shown(str(item)) for item in items) or "nothing more"


def _paths(paths: object) -> str:
    items = paths if isinstance(paths, list) else []
    return ", ".join(shown(display_path(Path(str(item)))) for item in items)
