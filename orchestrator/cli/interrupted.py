"""A command's work under its signal handlers: a signal's stop said in one line, with its status."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import suppress

from orchestrator.cli.common import err, fail
from orchestrator.errors import UserError
from orchestrator.terminal.signals import Interrupts


async def until_interrupted(interrupts: Interrupts, work: Awaitable[int]) -> int:
    """`work`'s exit status; a signal that stopped it (SIGINT, SIGTERM, SIGHUP) is said, and its
    status returned; a `UserError` is one line and status 1."""
    with interrupts.installed():
        try:
            return await work
        except asyncio.CancelledError:
            if interrupts.received is None:
                raise
            with suppress(OSError):  # the terminal may be gone (SIGHUP)
                err.print(f"[dim]stopped ({interrupts.received.name})[/dim]")
            return interrupts.exit_code
        except UserError as error:
            return fail(error)
