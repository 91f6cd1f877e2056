"""What the `orchestrator` commands share: the consoles, settings, one-line errors.

Commands import what they need when they run, so that `--help`, `--version`
and the quick management commands never load LangChain or LangGraph.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from orchestrator.errors import ConfigError, UserError
from orchestrator.settings import Settings, load_settings

if TYPE_CHECKING:
    from orchestrator.store.engine import Database
    from orchestrator.tools.discovery import ToolFolder

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

UserOption = Annotated[str, typer.Option("--user", "-u", help="Whose conversation this is.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]

# Text from a folder or a model must not move the cursor or recolour the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def settings_or_exit() -> Settings:
    """The settings, with logging set up; a bad setting ends the command with one line."""
    with user_errors():
        settings = load_settings()
    logging.basicConfig(
        level=settings.log_level,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return settings


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a UserError into one line on stderr and a non-zero exit."""
    try:
        yield
    except UserError as error:
        raise typer.Exit(fail(error)) from None


def fail(error: UserError) -> int:
    """Print the error's one line; the exit status (2 for settings, else 1)."""
    err.print(f"error: {error}", markup=False, highlight=False)
    return 2 if isinstance(error, ConfigError) else 1


def with_database(command: Callable[[Database], Awaitable[None]]) -> None:
    """Run `command` on the configured database (started if embedded), then close it."""
    from orchestrator.store.engine import Database

    settings = settings_or_exit()

    async def run() -> None:
        with err.status("[dim]starting the database…[/dim]"):
            database = await asyncio.to_thread(Database.from_settings, settings)
        try:
            await command(database)
        finally:
            await database.close()

    with user_errors():
        asyncio.run(run())


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
    """Name, version, description, capabilities and path of a tool folder (rich markup)."""
    capabilities = ", ".join(folder.config.capabilities) or "none declared"
    return (
        f"[bold]{shown(folder.name)}[/bold] {shown(folder.config.version)}\n"
        f"  {shown(folder.config.description)}\n"
        f"  capabilities: {shown(capabilities)}\n"
        f"  path: {shown(display_path(folder.path))}"
    )


def shown(text: str) -> str:
    """Untrusted text as rich markup that prints verbatim: no markup, no control characters."""
    return escape(_CONTROL.sub(lambda m: repr(m.group())[1:-1], text))
