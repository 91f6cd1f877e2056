"""A turn on an `orchestrator serve` at the terminal: what `chat --server` and `ask --server` share.

The command's own event loop (signals routed as `chat`'s are: Ctrl-C cancels
the running turn), the connection with the person's key, which session, and a
turn run to its end, with live output or quietly; Ctrl-C cancels it on the
server too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.cli.common import err, settings_or_exit
from orchestrator.cli.interrupted import until_interrupted
from orchestrator.cli.server_client.connection import ASSISTANT, Server
from orchestrator.cli.server_client.turn import RemoteTurn, waiting_questions
from orchestrator.conversation.turns import EventHandler, PendingQuestion, TurnResult
from orchestrator.errors import UserError
from orchestrator.terminal.render import TurnRenderer
from orchestrator.terminal.signals import Interrupts, exit_on_signals
from orchestrator.tools.hitl import Decision

if TYPE_CHECKING:
    from orchestrator.settings import Settings

NO_LATEST = "[dim]no earlier session on the server to continue: starting a new one[/dim]"

RemoteCommand = Callable[["Settings", Interrupts], Awaitable[int]]


def run_remote(command: RemoteCommand) -> int:
    """Run `command` on an event loop of its own, signals routed as `chat`'s are; its status."""
    settings = settings_or_exit()
    exit_on_signals()
    interrupts = Interrupts()

    return asyncio.run(until_interrupted(interrupts, command(settings, interrupts)))


def connect(settings: Settings, url: str, *, agent: str | None = None) -> Server:
    """The server at `url`, asked with ORCHESTRATOR_API_KEY; turns go to `agent` if named."""
    key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    return Server.connect(url, api_key=key, assistant=agent or ASSISTANT)


async def streamed(
    server: Server,
    session_id: str,
    *,
    text: str | None = None,
    decisions: Mapping[str, Decision] | None = None,
    on_event: EventHandler | None = None,
) -> RemoteTurn:
    """Run a turn (a message, or the answers to its questions) on the server, to its end.

    Cancelled (Ctrl-C), it cancels the run on the server before it ends.
    """
    turn = RemoteTurn()
    try:
        async for part in server.turn(session_id, text=text, decisions=decisions, on_run=turn.started):
            event = turn.feed(part.event, part.data)
            if event is not None and on_event is not None:
                on_event(event)
    except asyncio.CancelledError:
        if turn.run_id is not None:
            await asyncio.shield(server.cancel(session_id, turn.run_id))
        raise
    if turn.body is None and turn.run_id is not None:  # ended without its result: why?
        turn.status = await server.run_status(session_id, turn.run_id)
    return turn


async def rendered(
    server: Server,
    session_id: str,
    *,
    text: str | None = None,
    decisions: Mapping[str, Decision] | None = None,
    out: Console,
    err: Console,
) -> TurnResult | None:
    """A turn on the server with live output, as `terminal_turn.rendered_turn`; None on failure."""
    renderer = TurnRenderer(out=out, err=err)
    try:
        turn = await streamed(server, session_id, text=text, decisions=decisions, on_event=renderer)
        result = turn.result()
    except asyncio.CancelledError:
        with suppress(OSError):  # the terminal may be gone (SIGHUP)
            renderer.cancelled()
        raise
    except UserError as error:
        renderer.fail(str(error))
        return None
    renderer.finish(result)
    return result


async def pending(server: Server, session_id: str) -> list[PendingQuestion]:
    """The questions the session's turn waits on, whole, as the server holds them."""
    return waiting_questions(await server.waiting(session_id))


async def chosen_session(server: Server, *, session_id: str | None, latest: bool) -> tuple[str, bool]:
    """The session's id: the one given, the latest (`--continue`), or a new one's; and whether
    it was made now, unnamed (a new one)."""
    if latest:
        found = await server.sessions(limit=1)
        if found:
            return found[0]["thread_id"], False
        err.print(NO_LATEST)
    return await server.session(session_id), session_id is None
