"""What the `orchestrator` commands share: the consoles, settings, one-line errors.

Commands import what they need when they run, so that `--help`, `--version`
and the quick management commands never load LangChain or LangGraph.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from orchestrator.errors import ConfigError, UserError
from orchestrator.folders.skipped import PERSON_LINE
from orchestrator.folders.untrusted import printable
from orchestrator.identifiers import RULE, can_name
from orchestrator.settings import Settings, load_settings, misspelled_settings

if TYPE_CHECKING:
    from orchestrator.store.engine import Database

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def reopen_consoles() -> None:
    """Fit `out` and `err` to this process's streams and environment again.

    A fork of the warm process (`orchestrator.warm`) runs a command with that
    command's terminal and variables (NO_COLOR, COLUMNS...), which these consoles,
    made at import, did not see.
    """
    out.__init__(soft_wrap=True)
    err.__init__(stderr=True, soft_wrap=True)

def identifier(value: str | None) -> str | None:
    """A user or session id as given, if it can name one (`identifiers.can_name`)."""
    if value is None:
        return None
    if not can_name(value):
        raise typer.BadParameter(f"must be {RULE} (got {printable(value[:40])!r})")
    return value


UserOption = Annotated[
    str, typer.Option("--user", "-u", help="Whose conversation this is.", callback=identifier)
]
NoCacheOption = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Run every call: reuse no cached result, and keep none (ORCHESTRATOR_RESULT_CACHE).",
    ),
]


def cache_overrides(no_cache: bool) -> dict[str, object]:
    """The settings `--no-cache` sets: the result cache off for this command."""
    return {"result_cache": False} if no_cache else {}


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]

# How much of a folder's description the approval prompt shows: the lines after it
# (capabilities, path) must stay on the screen.


def settings_or_exit(**overrides: object) -> Settings:
    """The settings, with logging set up; a bad setting ends the command with one line.

    `overrides` are settings a command's options set (`--no-cache`), over the environment.
    """
    for line in misspelled_settings():  # first: a typo may be why a setting is missing
        err.print(f"[yellow]note:[/yellow] {escape(printable(line))}", highlight=False)
    with user_errors():
        settings = load_settings(**overrides)
        settings = _remote_settings(settings, overrides)
    logging.basicConfig(level=settings.log_level, handlers=[log_handler(settings.log_level)])
    return settings


def log_handler(level: str) -> logging.Handler:
    """Log records on stderr, each one line below DEBUG (see `_PrintableFormatter`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        _PrintableFormatter("%(levelname)s %(name)s: %(message)s", one_line=level != "DEBUG")
    )
    return handler


def _remote_settings(settings: Settings, overrides: dict[str, object]) -> Settings:
    """The settings with their remote copy over them, if one is set; one line says which."""
    if settings.remote_config_url is None:
        return settings
    from orchestrator.cli.remote_settings import NAME, with_remote
    from orchestrator.folders.remote_config import Source

    settings, remote = with_remote(settings, overrides)
    if remote is not None:
        note = "" if remote.source == Source.REMOTE else "note: "
        err.print(f"{note}{printable(remote.line(NAME))}", markup=False, highlight=False)
    return settings


class _PrintableFormatter(logging.Formatter):
    """Log lines with control characters escaped: messages quote folder names and errors.

    `one_line`: each record is one line, without its traceback (a library's
    errors while the database is away would fill the screen);
    ORCHESTRATOR_LOG_LEVEL=DEBUG shows them whole.
    """

    def __init__(self, fmt: str, *, one_line: bool) -> None:
        super().__init__(fmt)
        self.one_line = one_line

    def format(self, record: logging.LogRecord) -> str:
        line = getattr(record, PERSON_LINE, None)
        if isinstance(line, str):  # a line written for the person: no level, no logger name
            return printable(line)
        if self.one_line:
            said = " ".join(part.strip() for part in record.getMessage().splitlines() if part.strip())
            return printable(self.formatMessage(_with_message(record, said)))
        return "\n".join(printable(line) for line in super().format(record).split("\n"))


def _with_message(record: logging.LogRecord, message: str) -> logging.LogRecord:
    flat = logging.makeLogRecord(record.__dict__)
    flat.message = message
    return flat


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a UserError into one line on stderr and a non-zero exit."""
    try:
        yield
    except UserError as error:
        raise typer.Exit(fail(error)) from None


def fail(error: UserError) -> int:
    """Print the error's one line; the exit status (2 for settings, else 1)."""
    err.print(f"error: {printable(str(error))}", markup=False, highlight=False)
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







