"""Text shown to the person: untrusted text made printable, one line, a path, a folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from orchestrator.folders.untrusted import printable

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder

DESCRIPTION_CHARS = 500


def one_line(text: str, limit: int = 100) -> str:
    """`text` flattened to one line of at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


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
    from orchestrator.terminal.folder_reach import reach_lines  # it imports `shown` from here

    lines = [*reach_lines(folder.config), *requirement_lines(folder)]
    reach = "".join(f"\n{line}" for line in lines)
    return (
        f"[bold]{shown(folder.name)}[/bold] {shown(folder.config.version)}\n"
        f"  {shown(description)}\n"
        f"  capabilities: {capabilities}{reach}\n"
        f"  path: {shown(display_path(folder.path))}"
    )


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


def shown(text: str) -> str:
    """Untrusted text as rich markup that prints verbatim, on one line.

    No markup, and no control or format characters (escape sequences, newlines,
    bidirectional overrides): each is written as its escape, e.g. `\\x1b`.
    """
    return escape(printable(text))
