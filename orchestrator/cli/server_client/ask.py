"""`ask --server URL`: one turn on an `orchestrator serve`, printed as `ask` prints a local one.

The answer streams to stdout (progress on stderr), questions are asked as
`ask` asks them (end of input rejects those left), and `--json` prints the
same keys as a local `ask --json`: the turn's, as the server sent them, with
`error`, `follow_ups`, `session_id` and `user_id` (null: the server knows who
the key is). Background jobs the turn starts go on at the server's workers:
`ask --server` returns once the turn has answered, as `ask --no-wait` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.cli.ask_input import exit_status
from orchestrator.cli.common import err, out
from orchestrator.cli.cost import show_turn_cost
from orchestrator.cli.server_client.run import (
    chosen_session,
    connect,
    pending,
    rendered,
    run_remote,
    streamed,
)
from orchestrator.conversation.turns import PendingQuestion, TurnResult
from orchestrator.errors import UserError
from orchestrator.terminal.questions import QuestionAsker, answer_until_done, question_asker
from orchestrator.terminal.signals import Interrupts
from orchestrator.tools.hitl import Decision

if TYPE_CHECKING:
    from orchestrator.cli.server_client.connection import Server
    from orchestrator.settings import Settings

JsonPrinter = Callable[[dict[str, object]], None]


def ask_on_server(url: str, text: str, *, session_id: str | None, as_json: bool) -> int:
    """`ask --server URL TEXT`: the exit status (as `ask`'s: 0, 1 failed, 3 a budget stop)."""

    async def run(settings: Settings, interrupts: Interrupts) -> int:
        server = connect(settings, url)
        try:
            with question_asker(interrupts=interrupts, err=err) as asker:
                if as_json:
                    return await _ask_json(server, text, session_id, interrupts, asker)
                return await _ask(server, text, session_id, asker)
        finally:
            await server.close()

    return run_remote(run)


async def _ask(server: Server, text: str, session_id: str | None, asker: QuestionAsker) -> int:
    chosen, _ = await chosen_session(server, session_id=session_id, latest=False)
    waiting = await pending(server, chosen) if session_id else []
    if waiting and await _answered(server, chosen, waiting, asker, live=True) is None:
        return 1
    result = await rendered(server, chosen, text=text, out=out, err=err)
    if result is not None and result.questions:
        result = await _answered(server, chosen, result.questions, asker, live=True)
    show_turn_cost(result, err)  # stderr: standard output is the answer alone
    return exit_status(result)


async def _answered(
    server: Server,
    session_id: str,
    questions: list[PendingQuestion],
    asker: QuestionAsker,
    *,
    live: bool,
    bodies: list[dict[str, object]] | None = None,
) -> TurnResult | None:
    """Answer `questions` (end of input rejects), resuming on the server; the turn's end.

    `live`: with the turn's output as it comes; else quietly, each resumed
    turn's JSON added to `bodies`.
    """

    async def resume(decisions: dict[str, Decision]) -> TurnResult | None:
        if live:
            return await rendered(server, session_id, decisions=decisions, out=out, err=err)
        turn = await streamed(server, session_id, decisions=decisions)
        if bodies is not None and turn.body is not None:
            bodies.append(turn.body)
        return turn.result()

    result, _ = await answer_until_done(
        questions, asker=asker, resume=resume, session_id=session_id, reject_at_end=True
    )
    return result


async def _ask_json(
    server: Server,
    text: str,
    session_id: str | None,
    interrupts: Interrupts,
    asker: QuestionAsker,
) -> int:
    from orchestrator.cli.json_out import stdout_to_stderr

    with stdout_to_stderr() as print_json:
        return await _json_turn(server, text, session_id, interrupts, asker, print_json)


async def _json_turn(
    server: Server,
    text: str,
    session_id: str | None,
    interrupts: Interrupts,
    asker: QuestionAsker,
    print_json: JsonPrinter,
) -> int:
    bodies: list[dict[str, object]] = []
    keys: dict[str, object] = {"follow_ups": [], "session_id": session_id, "user_id": None}
    try:
        chosen, _ = await chosen_session(server, session_id=session_id, latest=False)
        keys["session_id"] = chosen
        if session_id:  # a session gone on with may wait for answers: given first
            await _answered(server, chosen, await pending(server, chosen), asker, live=False)
        turn = await streamed(server, chosen, text=text)
        result = turn.result()
        bodies.append(turn.body or {})
        result = await _answered(server, chosen, result.questions, asker, live=False, bodies=bodies) or result
    except asyncio.CancelledError:
        name = interrupts.received.name if interrupts.received else "cancelled"
        print_json({**_stopped(f"interrupted ({name})"), **keys})
        raise
    except UserError as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        print_json({**_stopped(str(error)), **keys})
        return 1
    print_json({**bodies[-1], "error": None, **keys})
    return exit_status(result)


def _stopped(error: str) -> dict[str, object]:
    """`ask --json`'s turn keys for a turn that failed or was stopped: no answer, `error` set."""
    nothing = TurnResult(answer="", answer_id=None, iterations=0)
    return {**nothing.to_json(), "answer": None, "error": error}
