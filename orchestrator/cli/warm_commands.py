"""`orchestrator warm status` and `warm stop`: the warm process that forks `ask`, `run`, `mcp serve`."""

from __future__ import annotations

import typer

from orchestrator.cli.common import out
from orchestrator.warm.control import state, stop

warm_app = typer.Typer(
    no_args_is_help=True,
    help="The warm process: the product loaded once, each `ask`, `run` and `mcp serve` a fork of it.",
)

NOT_RUNNING = "not running (the next `ask`, `run` or `mcp serve` starts it, unless ORCHESTRATOR_WARM_MINUTES=0)"


@warm_app.command("status")
def warm_status() -> None:
    """Whether a warm process runs for this installation, since when and until when."""
    running = state()
    out.print(running.describe() if running else NOT_RUNNING, markup=False, highlight=False)


@warm_app.command("stop")
def warm_stop() -> None:
    """Stop the warm process now; commands it is running finish first."""
    stopped = stop()
    line = f"stopped the warm process (pid {stopped.pid})" if stopped else "no warm process was running"
    out.print(line, markup=False, highlight=False)
