"""The `orchestrator` command: chat and ask, plus tools, new-agent, db, requests, sessions, mcp,
usage, serve, worker, jobs, warm and users (`tasks`, its old name, is a hidden alias)."""

from __future__ import annotations

import logging
import sys
import threading
from typing import Annotated

import typer

from orchestrator.cli.chat import ask, chat
from orchestrator.cli.common import err
from orchestrator.cli.jobs import jobs_app
from orchestrator.cli.manage import db_app, new_agent, requests_app, tools_app
from orchestrator.cli.mcp_commands import mcp_app
from orchestrator.cli.run_action import run_action
from orchestrator.cli.serve_command import serve
from orchestrator.cli.session_commands import sessions_app
from orchestrator.cli.usage_report import usage
from orchestrator.cli.users import users_app
from orchestrator.cli.warm_commands import warm_app
from orchestrator.cli.worker import worker
from orchestrator.process_exit import exit_now, exit_status

INTERNAL_ERROR = (
    "error: internal error ({error}); set ORCHESTRATOR_LOG_LEVEL=DEBUG to see the traceback"
)
LEFTOVER_THREADS = "note: not waiting for {count} thread(s) still running ({names}); exiting"



def _flags_without_a_type() -> None:
    """Typer writes `<bool>` after every flag in `--help` (`--help` too): a flag takes no value."""
    from typer.core import TyperOption

    typed = getattr(TyperOption, "display_type_rich", None)
    if typed is None:  # a typer that never showed types
        return

    def display_type_rich(self: TyperOption, ctx: object) -> str | None:  # typer's own click Context
        return None if self.is_flag else typed(self, ctx)

    TyperOption.display_type_rich = display_type_rich


_flags_without_a_type()

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
app.command("run")(run_action)
app.add_typer(tools_app, name="tools")
app.command("new-agent")(new_agent)
app.add_typer(db_app, name="db")
app.add_typer(requests_app, name="requests")
app.add_typer(sessions_app, name="sessions")
app.add_typer(mcp_app, name="mcp")
app.command()(serve)
app.command()(usage)
app.command()(worker)
app.add_typer(jobs_app, name="jobs")
app.add_typer(warm_app, name="warm")
app.add_typer(users_app, name="users")
app.add_typer(jobs_app, name="tasks", hidden=True)  # the old name of `jobs`, kept working


def main() -> None:
    """Console-script entry point: whatever goes wrong is one line, never a traceback."""
    try:
        app()
    except SystemExit as done:  # how every command ends
        _exit_past_leftover_threads(done.code)
        raise
    except KeyboardInterrupt:  # Ctrl-C before a command has taken over the signal
        err.print("interrupted")
        sys.exit(130)
    except Exception as error:  # commands print their own errors; this is a bug or the unexpected
        from orchestrator.redact import redact

        logging.getLogger("orchestrator").debug("command failed", exc_info=error)
        line = INTERNAL_ERROR.format(error=redact(f"{type(error).__name__}: {error}"))
        err.print(line, markup=False, highlight=False)
        sys.exit(1)


def _exit_past_leftover_threads(code: object) -> None:
    """With the command's cleanup done, exit now even if a tool left a non-daemon thread.

    Python would wait for such a thread at exit, for as long as it runs. The
    exit hooks still run (the embedded database is left in order); only the
    wait is skipped. The thread starting the embedded database is not one of
    them: a daemon thread, which `startup` waits for before the command ends.
    """
    leftover = [
        thread
        for thread in threading.enumerate()
        if thread.is_alive() and not thread.daemon and thread is not threading.main_thread()
    ]
    if not leftover:
        return
    names = ", ".join(thread.name for thread in leftover)
    note = LEFTOVER_THREADS.format(count=len(leftover), names=names)
    err.print(note, markup=False, highlight=False)
    exit_now(exit_status(code))
