"""Sessions at the terminal: `orchestrator sessions list`, and which one `chat` goes on with.

`chat --continue` goes on with the user's latest session, `chat --resume`
offers the recent ones to choose from, and a `--session` id that names no
session of theirs is said to start a new one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import JsonOption, UserOption, err, out, with_database
from orchestrator.terminal.text import one_line, shown

if TYPE_CHECKING:
    from orchestrator.runtime import Orchestrator
    from orchestrator.store.engine import Database
    from orchestrator.store.session_list import SessionSummary
    from orchestrator.terminal.lines import LineSource

sessions_app = typer.Typer(no_args_is_help=True, help="Your sessions: list them, to go on with one.")

FIRST_WORDS = 60  # characters of a session's first message in the list
PICKER_SIZE = 10  # sessions `chat --resume` offers
NOTHING = "No sessions of {user} yet."
PICK = "resume which? (number, Enter for a new session)> "
NEW_ONE = "[dim]no session {session} of yours yet: starting a new one with that id[/dim]"
NO_LATEST = "[dim]no earlier session to continue: starting a new one[/dim]"

LimitOption = Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")]


@sessions_app.command("list")
def list_sessions(user: UserOption = "local", limit: LimitOption = 20, as_json: JsonOption = False) -> None:
    """Your sessions, latest turn first: id, started, last turn, turns, first words."""
    from orchestrator.store.migrations import upgrade
    from orchestrator.store.session_list import recent_sessions

    async def run(database: Database) -> None:
        await upgrade(database)
        found = await recent_sessions(database, user_id=user, limit=limit)
        if as_json:
            print(json.dumps({"sessions": [s.to_json() for s in found]}, ensure_ascii=False))
        elif not found:
            out.print(NOTHING.format(user=user), markup=False)
        else:
            out.print(session_table(found), highlight=False)

    with_database(run)


def session_table(found: list[SessionSummary], *, numbered: bool = False) -> Table:
    """The sessions as a table (numbered: for `chat --resume` to pick from)."""
    table = Table(box=None, pad_edge=False)
    if numbered:
        table.add_column("#", justify="right")
    for heading in ("session", "started", "last turn"):
        table.add_column(heading, no_wrap=True)
    table.add_column("turns", justify="right")
    table.add_column("first words")
    for number, summary in enumerate(found, 1):
        cells = [
            Text(shown(summary.session_id)),
            _when(summary.started),
            _when(summary.last_turn),
            str(summary.turns),
            Text(one_line(summary.first_words or "", FIRST_WORDS)),
        ]
        table.add_row(*([str(number)] if numbered else []), *cells)
    return table


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M") if moment else "-"


async def chosen_session(
    runtime: Orchestrator,
    user_id: str,
    *,
    session_id: str | None,
    latest: bool,
    pick: bool,
    lines: LineSource | None,
) -> str | None:
    """The session `chat` goes on with (None: a new one), saying so when it is not the one asked for."""
    from orchestrator.store.session_list import recent_sessions, session_exists

    storage = runtime.storage
    if storage is None:  # nothing is kept: every session is new
        return session_id
    if session_id is not None:
        if not await session_exists(storage.database, session_id, user_id=user_id):
            err.print(NEW_ONE.format(session=shown(session_id)), highlight=False)
        return session_id
    if not latest and not pick:
        return None
    found = await recent_sessions(storage.database, user_id=user_id, limit=PICKER_SIZE)
    if not found:
        err.print(NO_LATEST)
        return None
    if latest or lines is None:
        return found[0].session_id
    return await _picked(found, lines)


async def _picked(found: list[SessionSummary], lines: LineSource) -> str | None:
    """The session the person picks by number; None (a new session) for an empty line or none."""
    err.print(session_table(found, numbered=True), highlight=False)
    while True:
        try:
            line = await lines.readline(prompt=PICK)
        except KeyboardInterrupt:  # Ctrl-C at the picker: no choice
            line = None
        if line is None or not line.strip():
            return None
        choice = line.strip()
        if choice.isdigit() and 1 <= int(choice) <= len(found):
            return found[int(choice) - 1].session_id
        err.print(f"Please give a number from 1 to {len(found)}, or an empty line.", markup=False)
