"""What `ask` sends and prints: the message with piped input, the `--json` object, the exit status.

Like `llm` and `claude -p`, `ask` reads standard input when it is not a
terminal: the piped text comes first, then the message given (`ask -`: the
piped text alone). Questions are then asked on the controlling terminal, or,
with none, rejected (nothing is approved silently); `--answers-from-stdin`
keeps standard input for the answers instead.
"""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, TextIO

from orchestrator.errors import UserError

if TYPE_CHECKING:
    from orchestrator.conversation.session import Session
    from orchestrator.conversation.turns import TurnResult

STDIN_ONLY = "-"
BUDGET_STOPPED = 3  # `ask`'s exit status when a budget ended the turn
NOTHING_PIPED = "`ask -` sends standard input, and it was empty"
BOTH_FROM_STDIN = "`ask -` sends standard input: it cannot hold answers too (--answers-from-stdin)"


def message_to_send(text: str, *, answers_from_stdin: bool, stdin: TextIO | None = None) -> str:
    """The message `ask TEXT` sends: TEXT after what was piped in, if anything was."""
    source: TextIO = stdin or sys.stdin or io.StringIO()  # none at all (a detached process): nothing piped
    if text == STDIN_ONLY:
        if answers_from_stdin:
            raise UserError(BOTH_FROM_STDIN)
        piped = _read_all(source)
        if not piped.strip():
            raise UserError(NOTHING_PIPED)
        return piped
    if answers_from_stdin or _is_terminal(source):
        return text
    piped = _read_all(source)
    return f"{piped.rstrip()}\n\n{text}" if piped.strip() else text


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed: nothing to read
        return True


def _read_all(stream: TextIO) -> str:
    """All of `stream`; bytes that are not UTF-8 are replaced, never a failure."""
    binary = getattr(stream, "buffer", None)
    try:
        if binary is not None:
            return binary.read().decode("utf-8", errors="replace")
        return stream.read()
    except (OSError, ValueError):  # closed or unreadable: nothing was piped
        return ""


def turn_json(
    result: TurnResult | None, *, session: Session, error: str | None = None
) -> dict[str, object]:
    """`ask --json`'s turn keys, the same whether the turn ended, failed or was interrupted.

    Without a result: no answer, and what the turn had spent when it stopped.
    """
    from orchestrator.conversation.turns import TurnResult

    if result is not None:
        return {**result.to_json(), "error": error}
    meter = session.usage
    stopped = TurnResult(
        answer="", answer_id=None, iterations=0, usage=meter.turn, budget_stop=meter.stop
    )
    return {**stopped.to_json(), "answer": None, "error": error}


def exit_status(result: TurnResult | None) -> int:
    """0 for an answer, BUDGET_STOPPED when a budget ended the turn, 1 when it failed."""
    if result is None:
        return 1
    return BUDGET_STOPPED if result.budget_stop is not None else 0
