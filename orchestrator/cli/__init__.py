"""The `orchestrator` command: chat and ask, plus tools, new-agent, db and requests."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from orchestrator.cli.chat import ask, chat
from orchestrator.cli.common import err
from orchestrator.cli.manage import db_app, new_agent, requests_app, tools_app

INTERNAL_ERROR = (
    "error: internal error ({error}); set ORCHESTRATOR_LOG_LEVEL=DEBUG to see the traceback"
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="A hierarchical agent orchestrator on LangGraph, in your terminal.",
)


def _show_version(value: bool) -> None:
    if value:
        from orchestrator import __version__

        print(f"orchestrator {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """A hierarchical agent orchestrator on LangGraph, in your terminal."""


app.command()(chat)
app.command()(ask)
app.add_typer(tools_app, name="tools")
app.command("new-agent")(new_agent)
app.add_typer(db_app, name="db")
app.add_typer(requests_app, name="requests")


def main() -> None:
    """Console-script entry point: whatever goes wrong is one line, never a traceback."""
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C before a command has taken over the signal
        err.print("interrupted")
        sys.exit(130)
    except Exception as error:  # commands print their own errors; this is a bug or the unexpected
        logging.getLogger("orchestrator").debug("command failed", exc_info=error)
        err.print(INTERNAL_ERROR.format(error=f"{type(error).__name__}: {error}"), markup=False, highlight=False)
        sys.exit(1)
