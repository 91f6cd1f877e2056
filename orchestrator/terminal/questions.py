"""Questions a paused turn waits on: shown together, then asked one by one (see `answers`).

`/pending` at a question shows them all again. Ctrl-C at a question rejects
that one, and the next is asked. End of input, or `/exit` (`/quit`), ends the
questions and never answers one: the caller says what becomes of those left
(`ask` rejects them, `chat` leaves them open for the next time). Nothing is
approved unless the person typed it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console

from orchestrator.conversation.session import PendingQuestion, TurnResult
from orchestrator.terminal.answers import (
    EditWanted,
    Unclear,
    edit_default,
    hint,
    is_plan,
    read_arguments,
    read_choice,
    show_questions,
)
from orchestrator.terminal.invocation import command_name
from orchestrator.terminal.signals import Interrupts
from orchestrator.terminal.text import shown
from orchestrator.terminal.tty_questions import person_terminal
from orchestrator.tools.hitl import Decision, EditDecision, Question, RejectDecision

if TYPE_CHECKING:
    from orchestrator.terminal.lines import LineSource
    from orchestrator.tools.decisions import Action

PENDING = "/pending"
EXIT = ("/exit", "/quit")
ENDED = RejectDecision(type="reject", message="no answer: the person's input ended")
LEFT_OPEN = (
    "{count} question(s) left open; "
    "`{command} chat --session {session}` asks them again"
)
Resume = Callable[[dict[str, Decision]], Awaitable[TurnResult | None]]


@dataclass(frozen=True)
class AnswerChannel:
    """Where answers are read and questions shown; `echo`: write piped answers after their prompt."""

    lines: LineSource
    console: Console
    echo: bool


@dataclass(frozen=True)
class Answers:
    """The decisions given, by question id; `ended`: the input ended before all were answered."""

    decisions: dict[str, Decision]
    ended: bool


class _CtrlC:
    """Ctrl-C at a question."""


CTRL_C = _CtrlC()


class QuestionAsker:
    """Shows the open questions together, then asks them one by one."""

    def __init__(self, channel: Callable[[], AnswerChannel], *, interrupts: Interrupts) -> None:
        self._open_channel = channel
        self._channel: AnswerChannel | None = None
        self.interrupts = interrupts
        self._left = False  # the person typed /exit: nothing more is read, as after end of input

    @property
    def channel(self) -> AnswerChannel:
        """Opened on the first question: a command that asks nothing opens no terminal."""
        if self._channel is None:
            self._channel = self._open_channel()
        return self._channel

    async def ask(self, questions: list[PendingQuestion]) -> Answers:
        """Each question's decision; stops at end of input (`ended`)."""
        show_questions(questions, self.channel.console)
        decisions: dict[str, Decision] = {}
        for number, pending in enumerate(questions, 1):
            decision = await self._ask_one(questions, number)
            if decision is None:
                return Answers(decisions, ended=True)
            decisions[pending.id] = decision
        return Answers(decisions, ended=False)

    async def _ask_one(self, questions: list[PendingQuestion], number: int) -> Decision | None:
        question = questions[number - 1].question
        prompt = f"[{number}/{len(questions)}] {hint(question)}> "
        while True:
            line = await self._read(prompt)
            if line is None or isinstance(line, _CtrlC):
                return self._rejected(line)
            if line.strip() == PENDING:
                show_questions(questions, self.channel.console)
                continue
            choice = read_choice(line, question)
            if isinstance(choice, Unclear):
                self.channel.console.print(shown(choice.problem), highlight=False)
            elif isinstance(choice, EditWanted):
                return await self._edit(question, choice.text)
            else:
                return choice

    async def _edit(self, question: Question, text: str) -> Decision | None:
        """Arguments as JSON until they parse as an object (the gate checks them against its schema)."""
        action = question["action"]
        current = edit_default(question)
        while True:
            if not text:
                prompt = "new tasks (JSON)> " if is_plan(question) else "new arguments (JSON)> "
                line = await self._read(prompt, default=current)
                if line is None or isinstance(line, _CtrlC):
                    return self._rejected(line)
                text = line
            arguments = read_arguments(text, question=question)
            if not isinstance(arguments, Unclear):
                edited: Action = {"name": action["name"], "args": arguments}
                return EditDecision(type="edit", edited_action=edited)
            self.channel.console.print(shown(arguments.problem), highlight=False)
            text = ""

    def _rejected(self, line: None | _CtrlC) -> Decision | None:
        if line is None:
            return None
        self.channel.console.print("rejected (Ctrl-C)", highlight=False)
        return RejectDecision(type="reject")

    async def _read(self, prompt: str, *, default: str = "") -> str | None | _CtrlC:
        """One line; Ctrl-C (a key at a line editor, SIGINT at a pipe) is CTRL_C, `/exit` None."""
        if self._left:
            return None
        channel = self.channel
        reading = asyncio.ensure_future(_line(channel.lines, prompt, default))
        with self.interrupts.turn(reading):
            try:
                line = await reading
            except asyncio.CancelledError:
                current = asyncio.current_task()  # never None here: this runs in a task
                if current is not None and current.cancelling():
                    raise  # the command itself is ending
                line = CTRL_C
        if channel.echo:
            shown_line = "" if line is None or isinstance(line, _CtrlC) else line
            channel.console.print(f"{prompt}{shown_line}", markup=False, highlight=False)
        if isinstance(line, str) and line.strip().lower() in EXIT:
            self._left = True  # the person leaves: no answer, now or to a later question
            return None
        return line


async def _line(lines: LineSource, prompt: str, default: str) -> str | None | _CtrlC:
    # KeyboardInterrupt must not leave a task: the event loop would stop on it.
    try:
        return await lines.readline(prompt=prompt, default=default)
    except KeyboardInterrupt:
        return CTRL_C


async def answer_until_done(
    questions: list[PendingQuestion],
    *,
    asker: QuestionAsker,
    resume: Resume,
    session_id: str,
    reject_at_end: bool,
) -> tuple[TurnResult | None, bool]:
    """Ask, resume once with all answers, and again while new questions come.

    The turn's result (None if a resumed turn failed, or questions were left
    open) and whether the input ended. At end of input the questions left are
    rejected (`reject_at_end`, so the turn still ends) or left open, unanswered;
    the turn goes on with the answers given before the end either way.
    """
    result: TurnResult | None = None
    ended = False
    while questions:
        answers = await asker.ask(questions)
        decisions = answers.decisions
        if answers.ended:
            ended = True
            if not reject_at_end:
                if decisions:  # the answers given before the end are kept: the turn goes on with them
                    result = await resume(decisions)
                    questions = result.questions if result is not None else []
                if questions:
                    left_open = LEFT_OPEN.format(
                        count=len(questions), session=session_id, command=command_name()
                    )
                    asker.channel.console.print(left_open, markup=False, highlight=False)
                return None, True
            left = [q for q in questions if q.id not in decisions]
            rejected = f"end of input: {len(left)} question(s) rejected"
            asker.channel.console.print(rejected, highlight=False)
            decisions = {**decisions, **{q.id: ENDED for q in left}}
        result = await resume(decisions)
        if result is None:
            return None, ended
        questions = result.questions
    return result, ended


@contextmanager
def question_asker(
    *,
    interrupts: Interrupts,
    err: Console,
    lines: LineSource | None = None,
    on_terminal: bool = False,
) -> Iterator[QuestionAsker]:
    """The asker of a command: on the controlling terminal when there is one, else on stdin.

    `lines` are the command's own input (chat's), `on_terminal` whether they
    are the terminal's line editor: then answers are read there too. Without a
    terminal, answers are the next lines of `lines` (or of stdin).
    """
    with ExitStack() as stack:

        def channel() -> AnswerChannel:
            # Imported with the first question: the line editor costs a command that asks none.
            from orchestrator.terminal.lines import PipedLines, TerminalLines

            if on_terminal:
                return AnswerChannel(TerminalLines(history=None), console=err, echo=False)
            terminal = stack.enter_context(person_terminal())
            if terminal is not None:
                console = Console(file=terminal.output, highlight=False)
                editor = TerminalLines(history=None, terminal=terminal)
                return AnswerChannel(editor, console=console, echo=False)
            return AnswerChannel(lines or PipedLines(), console=err, echo=True)

        yield QuestionAsker(channel, interrupts=interrupts)
