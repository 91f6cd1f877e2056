"""The question about an MCP server's tool definitions: shown whole when new, as changes after.

Asked once the approved folders' servers have started (their definitions
come from the servers), the same way as the folder questions (see `prompts`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.cli.common import display_path, one_line, shown
from orchestrator.cli.prompts import ApprovalPrompt, person_terminal

if TYPE_CHECKING:  # the MCP SDK loads only when a server starts
    from orchestrator.tools.mcp.definitions import ServerDefinition, ToolDefinition
    from orchestrator.tools.mcp.servers import ServerQuestion

QUESTION = "Approve these tools? \\[y/N] "
MAX_LINES = 30  # tools or changes shown; the rest are counted
DESCRIPTION_CHARS = 100


class ServerPrompt:
    """Asks y/N about each new or changed MCP server definition (an `AskServer`).

    `leftover` is the folder prompt's: once it kept a piped line as a
    message, nothing more is asked.
    """

    def __init__(self, *, err: Console, keep_messages: bool, leftover: list[str]) -> None:
        self.err = err
        self.keep_messages = keep_messages
        self.leftover = leftover

    def __call__(self, question: ServerQuestion) -> bool | None:
        if self.leftover:
            return None
        with person_terminal() as terminal:
            prompt = ApprovalPrompt(
                err=self.err, terminal=terminal, keep_messages=self.keep_messages
            )
            answer = prompt.confirm(describe_question(question), question=QUESTION)
        self.leftover.extend(prompt.leftover)
        return answer


def describe_question(question: ServerQuestion) -> str:
    """The server, and its tools (new) or what changed since approval (rich markup)."""
    folder, definition = question.folder, question.definition
    heading = (
        "MCP server changed its tools since you approved them"
        if question.changes
        else "New MCP server"
    )
    info = definition.server_info
    lines = [
        f"\n[yellow]{heading}:[/yellow] [bold]{shown(folder.name)}[/bold] "
        f"({shown(display_path(folder.path))})",
        f"  server: {shown(str(info.get('name', '?')))} {shown(str(info.get('version', '')))}",
        f"  runs: {shown(_launch(definition))}",
        f"  digest: sha256:{definition.digest[:16]}… "
        "(of the launch, serverInfo, instructions, tools)",
    ]
    if question.changes:
        lines += [f"  {shown(change)}" for change in _capped(question.changes)]
    else:
        tools = list(definition.tools.values())
        lines.append(f"  tools ({len(tools)}):")
        lines += [
            f"    {line}" for line in _capped([_tool_line(tool) for tool in tools], markup=True)
        ]
    return "\n".join(lines)


def _launch(definition: ServerDefinition) -> str:
    launch = definition.launch
    if "url" in launch:
        return str(launch["url"])
    args = launch.get("args")
    return " ".join(
        [str(launch.get("command", "?")), *map(str, args if isinstance(args, list) else [])]
    )


def _tool_line(tool: ToolDefinition) -> str:
    from orchestrator.tools.mcp.marks import hint  # only when a question is shown

    description = one_line(tool.description or tool.title or "", DESCRIPTION_CHARS)
    marks = " [red](destructive)[/red]" if hint(tool, "destructiveHint") else ""
    return f"[bold]{shown(tool.name)}[/bold]  {shown(description)}{marks}"


def _capped(lines: list[str], *, markup: bool = False) -> list[str]:
    if len(lines) <= MAX_LINES:
        return lines
    more = f"… and {len(lines) - MAX_LINES} more"
    return [*lines[:MAX_LINES], f"[dim]{more}[/dim]" if markup else more]
