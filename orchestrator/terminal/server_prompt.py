"""The question about an MCP server's tool definitions: shown whole when new, as changes after.

Asked once the approved folders' servers have started (their definitions
come from the servers), the same way as the folder questions (see `prompts`).
Nothing the model would receive is left out or cut short: every tool, its whole
description, its input schema, the server's instructions; and the whole
definition, as it is approved, is written to a file whose path is shown.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.folders.approvals import Later
from orchestrator.terminal.text import display_path, shown
from orchestrator.terminal.tty_questions import ApprovalPrompt, person_terminal

if TYPE_CHECKING:  # the MCP SDK loads only when a server starts
    from orchestrator.sources.mcp.clients import ServerQuestion
    from orchestrator.sources.mcp.definitions import ServerDefinition, ToolDefinition

QUESTION = "Approve these tools? \\[y/N] "


class ServerPrompt:
    """Asks y/N about each new or changed MCP server definition (an `AskServer`).

    `leftover` is the folder prompt's: once it kept a piped line as a
    message, nothing more is asked.
    """

    def __init__(
        self,
        *,
        err: Console,
        keep_messages: bool,
        leftover: list[str],
        review_dir: Path | None = None,
    ) -> None:
        self.err = err
        self.keep_messages = keep_messages
        self.leftover = leftover
        self.review_dir = review_dir  # where each definition asked about is written whole

    def __call__(self, question: ServerQuestion) -> bool | Later | None:
        if self.leftover:
            return None
        with person_terminal() as terminal:
            prompt = ApprovalPrompt(
                err=self.err, terminal=terminal, keep_messages=self.keep_messages
            )
            saved = save_definition(question, self.review_dir) if self.review_dir else None
            answer = prompt.confirm(describe_question(question, saved=saved), question=QUESTION)
        self.leftover.extend(prompt.leftover)
        return None if isinstance(answer, str) else answer  # no other words were offered


def save_definition(question: ServerQuestion, directory: Path) -> Path | None:
    """The whole definition asked about, as JSON in a private file; None if it cannot be written."""
    from orchestrator.sources.mcp.definitions import canonical

    path = directory / (question.folder.key.replace("/", "__") + ".json")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(canonical(question.definition.model_dump(mode="json")) + "\n")
    except OSError:
        return None
    return path


def describe_question(question: ServerQuestion, *, saved: Path | None = None) -> str:
    """The server, and its tools (new) or what changed since approval (rich markup).

    Everything the model would receive is shown in full; `saved` is where the
    whole definition was written, if it was.
    """
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
    if saved is not None:
        lines.append(f"  the whole definition: {shown(display_path(saved))}")
    if question.changes:  # a summary, then in full what a yes approves
        lines += [f"  {shown(change)}" for change in question.changes]
    if definition.instructions:
        lines.append(f"  instructions: {shown(definition.instructions)}")
    tools = list(definition.tools.values())
    lines.append(f"  tools ({len(tools)}):")
    lines += [line for tool in tools for line in _tool_lines(tool)]
    return "\n".join(lines)


def _launch(definition: ServerDefinition) -> str:
    launch = definition.launch
    if "url" in launch:
        return str(launch["url"])
    args = launch.get("args")
    return " ".join(
        [str(launch.get("command", "?")), *map(str, args if isinstance(args, list) else [])]
    )


def _tool_lines(tool: ToolDefinition) -> list[str]:
    """A tool as the model receives it: name, title, whole description, schemas, annotations."""
    from orchestrator.sources.mcp.definitions import canonical
    from orchestrator.sources.mcp.marks import hint  # only when a question is shown

    marks = " [red](destructive)[/red]" if hint(tool, "destructiveHint") else ""
    description = shown(tool.description or "")
    lines = [f"    [bold]{shown(tool.name)}[/bold]  {description}{marks}"]
    parts = {
        "title": tool.title,
        "input": canonical(tool.inputSchema) if tool.inputSchema else None,
        "output": canonical(tool.outputSchema) if tool.outputSchema else None,
        "annotations": canonical(tool.annotations) if tool.annotations else None,
    }
    lines += [f"      {label}: {shown(text)}" for label, text in parts.items() if text]
    return lines
