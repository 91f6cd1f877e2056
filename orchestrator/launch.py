"""The `orchestrator` command's entry point: a warm process when one runs, else the command here.

`ask`, `run` and `mcp serve` are handed to the warm process when one runs for this
installation (`orchestrator.warm`): a fork of a process that imported the product
once runs them, with this process's streams, directory and environment. Run the
long way, they start one for the next command, unless `ORCHESTRATOR_WARM_MINUTES`
is 0.

Starting a command imports a few thousand modules and builds the graph: many
objects, hardly any garbage. CPython's cyclic collector walks them over and over
while they are made, and once more when the process exits. Paused until the
command's startup is over, then frozen (`gc.freeze`: left out of every later
collection), they cost nothing more: a third of the CPU of a whole
`orchestrator ask` (scripts/bench_turn.py, startup_ratio). Objects made after
that are collected as usual.
"""

from __future__ import annotations

import contextlib
import os
import sys

from orchestrator.collector import pause_collection, resume_collection
from orchestrator.warm.client import run_warm, wants_warm
from orchestrator.warm.protocol import SERVE_FLAG

__all__ = ["main", "pause_collection", "resume_collection"]


def main() -> None:
    """Console-script entry point: `orchestrator.cli.main` with the collector paused to start."""
    if sys.argv[1:2] == [SERVE_FLAG]:
        sys.exit(_serve_warm(sys.argv[2:]))
    handed_over = run_warm(sys.argv[1:])
    if handed_over is not None:
        sys.exit(handed_over)
    # As the command found it: the command may change its own (the embedded server's locale).
    environment = dict(os.environ)
    pause_collection()
    from orchestrator.cli import main as run

    try:
        run()
    finally:
        resume_collection()
        _warm_for_next(sys.argv[1:], environment)


def _warm_for_next(argv: list[str], environment: dict[str, str]) -> None:
    """After a command the warm process would have run: start one for the next."""
    if not wants_warm(argv):
        return
    from orchestrator.errors import ConfigError
    from orchestrator.settings import load_settings
    from orchestrator.warm.control import start

    with contextlib.suppress(ConfigError, OSError):  # the command has said what was wrong
        start(minutes=load_settings().warm_minutes, environment=environment)


def _serve_warm(arguments: list[str]) -> int:
    import logging

    from orchestrator.warm.server import serve

    level = logging.DEBUG if os.environ.get("ORCHESTRATOR_LOG_LEVEL") == "DEBUG" else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(message)s")
    pause_collection()
    import orchestrator.cli  # noqa: F401 (the commands' own modules, whatever the list holds)

    return serve(minutes=float(arguments[0]), run=_run_forked)


def _run_forked() -> int:
    """The command in a fork of the warm process: its exit status."""
    from orchestrator.cli import main as run
    from orchestrator.cli.common import reopen_consoles
    from orchestrator.process_exit import exit_status

    reopen_consoles()
    pause_collection()
    try:
        run()
    except SystemExit as done:
        if isinstance(done.code, str):  # as Python itself says it
            print(done.code, file=sys.stderr)
        return exit_status(done.code)
    finally:
        resume_collection()
    return 0
