"""What the `orchestrator` commands share: the consoles, settings, one-line errors."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console

from orchestrator.errors import ConfigError, UserError
from orchestrator.settings import Settings, load_settings
from orchestrator.store.engine import Database

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

UserOption = Annotated[str, typer.Option("--user", "-u", help="Whose conversation this is.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


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
    settings = settings_or_exit()

    async def run() -> None:
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
