"""One turn at the terminal: run (or resume, or answer) it with live output, and say what failed.

Shared by `chat` and `ask`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress

from rich.console import Console
from rich.markup import escape

from orchestrator.conversation.session import EventHandler, PendingQuestion, Session, TurnResult
from orchestrator.errors import UserError
from orchestrator.terminal.render import TurnRenderer
from orchestrator.tools.hitl import Decision

logger = logging.getLogger(__name__)

INTERNAL_ERROR = (
    "internal error ({error}); set ORCHESTRATOR_LOG_LEVEL=DEBUG to see the traceback"
)
DATA_DIR_GONE = (
    "the data directory {path} was deleted while this ran: nothing more can be kept "
    "(the database was in it); start again to begin anew"
)


def data_dir_gone(session: Session) -> str | None:
    """The line to say when the embedded database's data directory was deleted; else None."""
    settings = session.settings
    if session.storage is None or settings.database_url or settings.data_dir.exists():
        return None
    from orchestrator.terminal.text import display_path

    return DATA_DIR_GONE.format(path=f"{display_path(settings.data_dir)}/")


def failure_line(error: Exception) -> str:
    """One line for a failed turn: the user error itself, or a pointer to the traceback."""
    if isinstance(error, UserError):
        return str(error)
    logger.debug("turn failed", exc_info=error)
    from orchestrator.store.engine import database_problem

    problem = database_problem(error)
    if problem is not None:
        return f"{problem}; the next message tries again"
    first = str(error).strip().splitlines()
    return INTERNAL_ERROR.format(error=f"{type(error).__name__}: {first[0] if first else ''}")


async def recover_from(error: Exception, session: Session, *, err: Console) -> None:
    """After a database failure, start the embedded server again if it died (said in one line)."""
    from orchestrator.store.engine import database_problem

    if session.storage is None or database_problem(error) is None or data_dir_gone(session):
        return  # nothing to restart from: the turn's line said why
    try:
        restarted = await session.storage.recover()
    except Exception as failure:  # the next failure tries again
        logger.debug("restarting the embedded database failed", exc_info=failure)
        err.print(f"[dim]could not restart the embedded database: {escape(failure_line(failure))}[/dim]")
        return
    if restarted:
        err.print("[dim]the embedded database had stopped: started it again[/dim]")


async def rendered_turn(
    session: Session, text: str | None, *, out: Console, err: Console
) -> TurnResult | None:
    """Run one turn (None: resume the unfinished one) with live output; failures give None."""

    def start(on_event: EventHandler) -> Awaitable[TurnResult]:
        if text is None:
            return session.resume(on_event=on_event)
        return session.run(text, on_event=on_event)

    return await _rendered(session, start, out=out, err=err)


async def rendered_answer(
    session: Session, decisions: Mapping[str, Decision], *, out: Console, err: Console
) -> TurnResult | None:
    """Resume the waiting turn with the person's decisions, with live output; failures give None."""
    return await _rendered(
        session, lambda on_event: session.answer(decisions, on_event=on_event), out=out, err=err
    )


async def _rendered(
    session: Session,
    start: Callable[[EventHandler], Awaitable[TurnResult]],
    *,
    out: Console,
    err: Console,
) -> TurnResult | None:
    renderer = TurnRenderer(out=out, err=err)
    try:
        result = await start(renderer)
    except asyncio.CancelledError:
        with suppress(OSError):  # the terminal may be gone (SIGHUP)
            renderer.cancelled()
        raise
    except Exception as error:  # keep the session alive whatever broke
        renderer.fail(data_dir_gone(session) or failure_line(error))
        await recover_from(error, session, err=err)
        return None
    renderer.finish(result)
    return result


async def resume_turn(session: Session, *, out: Console, err: Console) -> list[PendingQuestion] | None:
    """Open the session, finishing a turn a stopped process left half done.

    The questions the session's turn waits on (none: it waits on nothing);
    None on failure.
    """
    try:
        unfinished = await session.open()
        waiting = [] if unfinished else await session.pending()
    except Exception as error:
        err.print(f"[red]error:[/red] {escape(failure_line(error))}", highlight=False)
        return None
    if waiting:
        count = len(waiting)
        err.print(
            f"[dim]session {session.session_id} waits for your answer to {count} question(s)[/dim]"
        )
        return waiting
    if not unfinished:
        return []
    err.print(f"[dim]finishing the interrupted turn of session {session.session_id}[/dim]")
    result = await rendered_turn(session, None, out=out, err=err)
    return None if result is None else result.questions
