"""The `orchestrator` command's entry point: the cyclic collector paused while a command starts.

Starting a command imports a few thousand modules and builds the graph: many
objects, hardly any garbage. CPython's cyclic collector walks them over and over
while they are made, and once more when the process exits. Paused until the
command's startup is over, then frozen (`gc.freeze`: left out of every later
collection), they cost nothing more: a third of the CPU of a whole
`orchestrator ask` (scripts/bench_turn.py, startup_ratio). Objects made after
that are collected as usual.
"""

from __future__ import annotations

from orchestrator.collector import pause_collection, resume_collection

__all__ = ["main", "pause_collection", "resume_collection"]


def main() -> None:
    """Console-script entry point: `orchestrator.cli.main` with the collector paused to start."""
    pause_collection()
    from orchestrator.cli import main as run

    try:
        run()
    finally:
        resume_collection()
