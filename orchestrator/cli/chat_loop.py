"""What every chat at the terminal shares, local or against a server: lines read until the end,
slash commands and turns told apart, Ctrl-C cancelling a turn, and a second one at the prompt
ending the chat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine

from rich.console import Console

from orchestrator.cli.cost import show_turn_cost
from orchestrator.conversation.turns import TurnResult
from orchestrator.terminal.lines import LineSource, quiet_keyboard
from orchestrator.terminal.signals import Interrupts

# A Ctrl-C this soon after the one that cancelled a turn is the same keypress repeated, not "exit".
REPEATED_CTRL_C_SECONDS = 1.0
EXIT_HINT = "[dim](Ctrl-C again to exit, or Ctrl-D)[/dim]"


class ChatLoop:
    """The loop of a chat; `turn` and `command` are the kind's own (`ChatRepl`, the server's)."""

    def __init__(
        self, *, lines: LineSource, interrupts: Interrupts, out: Console, err: Console, clock: Callable[[], float]
    ) -> None:
        self.lines = lines
        self.interrupts = interrupts
        self.out = out
        self.err = err
        self.costs = out if out.is_terminal else err  # where each turn's cost line goes
        self.failed_turns = 0
        self._clock = clock
        self._exit_armed = False  # the last thing was a Ctrl-C: another one at the prompt exits
        self._cancelled_at: float | None = None  # when a Ctrl-C last cancelled a turn
        self._ended = False  # the input ended at a question

    async def turn(self, text: str) -> None:
        """One turn of the person's message."""
        raise NotImplementedError

    async def command(self, line: str) -> bool:
        """A slash command; False when it ends the chat."""
        raise NotImplementedError

    def stops_after_turn(self) -> bool:
        """Whether no turn can follow the one that ran (the chat ends)."""
        return False

    def counted(self, result: TurnResult) -> None:
        """A turn that ran: what the chat keeps of it besides its cost line."""

    async def read_lines(self) -> None:
        """Turns and commands, line by line, until the input ends, /exit, or Ctrl-C twice."""
        while not self._ended:
            try:
                line = await self.lines.readline()
            except KeyboardInterrupt:  # Ctrl-C at an empty prompt
                if self._repeated_ctrl_c():
                    continue
                if self._exit_armed:
                    break
                self._exit_armed = True
                self.err.print(EXIT_HINT)
                continue
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            self._exit_armed = False
            if line.startswith("/"):
                if not await self.command(line):
                    break
                continue
            await self.turn(line)
            if self.stops_after_turn():
                break

    async def _run(self, work: Coroutine[object, object, TurnResult | None]) -> TurnResult | None:
        """Run a turn's work; Ctrl-C cancels it (None), a failure counts (None)."""
        task = asyncio.ensure_future(work)
        with self.interrupts.turn(task), quiet_keyboard():
            try:
                result = await task
            except asyncio.CancelledError:
                current = asyncio.current_task()  # never None here: this runs in a task
                if current is not None and current.cancelling():
                    raise  # the command itself is ending
                self._exit_armed = True
                self._cancelled_at = self._clock()
                self.err.print(EXIT_HINT)
                return None
        if result is None:
            self.failed_turns += 1
            return None
        self.counted(result)
        show_turn_cost(result, self.costs)
        return result

    def _repeated_ctrl_c(self) -> bool:
        """Whether this Ctrl-C came right after the one that cancelled a turn (then it is ignored)."""
        if self._cancelled_at is None:
            return False
        return self._clock() - self._cancelled_at < REPEATED_CTRL_C_SECONDS
