"""Terminal output: live turn progress, streamed answers, tool folders."""

from __future__ import annotations

import re

from rich.console import Console, Group
from rich.markup import escape
from rich.status import Status
from rich.text import Text

from orchestrator.conversation.session import TurnEvent, TurnResult
from orchestrator.events import BACKGROUND, PlanEvent, Stage, ToolEvent, ToolPhase
from orchestrator.folders.untrusted import shown_name
from orchestrator.terminal.checklist import PlanBoard
from orchestrator.terminal.markdown_out import MarkdownBlocks, print_markdown

# In answers, line breaks and tabs stay; any other control character (an escape
# sequence could recolour, move the cursor or retitle the terminal) is shown escaped.
_ANSWER_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

STAGE_TEXT = {
    Stage.SUBMITTED: "submitted",
    Stage.STREAMING: "thinking…",
    Stage.EXECUTING: "running tools…",
    Stage.PROCESSING: "reading tool results…",
    Stage.COMPLETE: "done",
    Stage.ERROR: "failed",
}


def answer_text(text: str) -> str:
    """A model's answer as it may reach the terminal: control characters but line breaks escaped."""
    return _ANSWER_CONTROL.sub(lambda control: repr(control.group())[1:-1], text)


def _ended(event: ToolEvent) -> str:
    """How a call ended, as its line says: its status, or the job it goes on as."""
    if event["status"] == BACKGROUND:
        return f"moved to the background as job {event['request_id']}"
    return str(event["status"])


class TurnRenderer:
    """Shows one turn: a line per finished tool call, and on a terminal a live spinner.

    Answers go to `out` (stdout); everything else goes to `err` (stderr). The
    spinner only ever runs on a line of its own: it is stopped while text streams.
    When `out` is a terminal, answers are rendered as Markdown, a finished block
    at a time; piped, they are the model's text as it streams.

    A plan is a checklist: on a terminal it stands above the spinner and changes
    in place as its tasks run, and is printed for good when it ends; piped, it is
    printed when it is made and when it ends.
    """

    def __init__(self, *, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self.streamed: dict[str | None, list[str]] = {}  # per reply, the text shown of it
        self._mid_line = False
        self._blocks = MarkdownBlocks() if out.is_terminal else None
        self._printed_block = False  # blocks are set apart by a blank line
        self._status: Status | None = err.status("") if err.is_terminal else None
        self.plans = PlanBoard()
        self._stage = ""
        self._show(STAGE_TEXT[Stage.SUBMITTED])

    def __call__(self, event: TurnEvent) -> None:
        if event["kind"] == "token":
            self._token(event["text"], event["message_id"])
        elif event["kind"] == "plan":
            self._plan(event)
        elif event["kind"] == "status":
            if event["stage"] in (Stage.COMPLETE, Stage.ERROR):
                self._stop_status()
            elif event["stage"] == Stage.COMPACTED:  # a quiet line: a note on the model's window
                self._end_line()
                self.err.print(f"[dim]{escape(event['detail'])}[/dim]", highlight=False)
            else:
                self._show(STAGE_TEXT[event["stage"]])
        else:
            position = f"{shown_name(event['tool'])} ({event['index']}/{event['total']})"
            if event["phase"] == ToolPhase.COMPLETED:
                self._end_line()
                indent = "  " * (event["depth"] + 1)
                line = f"{indent}[dim]tool {escape(position)}: {escape(_ended(event))}[/dim]"
                self.err.print(line, highlight=False)
            self._show(f"{position}: {event['phase']}")

    def _plan(self, event: PlanEvent) -> None:
        view = self.plans.apply(event)
        if view is None:
            return
        plan_id = event["plan_id"]
        made, whole = view["status"] == "running", event["plan"] is not None
        if whole and not made and self.plans.is_root(plan_id):  # it ended: shown for good
            self._print_plan(plan_id)
            self.plans.drop(plan_id)
        elif whole and made and self._status is None and self.plans.is_root(plan_id):
            self._print_plan(plan_id)  # piped: as it is made, and as it ends
        self._show(self._stage)

    def _print_plan(self, plan_id: str) -> None:
        self._end_line()
        for line in self.plans.lines_of(plan_id):
            self.err.print(line, highlight=False)

    def finish(self, result: TurnResult) -> None:
        """End the turn's output, printing what of the answer was not streamed."""
        self._stop_status()
        shown = "".join(self.streamed.get(result.answer_id, []))
        if not shown:
            self._flush()
            self._end_line()
            self._write(result.answer)
        elif result.answer.startswith(shown):  # a consumer that missed the end of the reply
            self._write(result.answer[len(shown) :])
        self._flush()
        self._end_line()

    def fail(self, message: str) -> None:
        """End the turn with a one-line error."""
        self._stop_status()
        self._flush()
        self._end_line()
        self.err.print(f"[red]error:[/red] {escape(message)}", highlight=False)

    def cancelled(self) -> None:
        """End a turn the user cancelled."""
        self._stop_status()
        self._flush()
        self._end_line()
        self.err.print("[yellow]cancelled[/yellow]")

    def _token(self, text: str, message_id: str | None) -> None:
        self._stop_status()
        if self.streamed and message_id not in self.streamed:
            self._flush()
            self._end_line()  # a new reply after text that came with tool calls
        self.streamed.setdefault(message_id, []).append(text)
        self._write(text)

    def _write(self, text: str) -> None:
        if self._blocks is not None:
            for block in self._blocks.feed(text):
                self._block(block)
            return
        self.out.print(answer_text(text), end="", markup=False, highlight=False, soft_wrap=True)
        if text:
            self._mid_line = not text.endswith("\n")

    def _block(self, block: str) -> None:
        """One finished Markdown block on the terminal, a blank line after the one before."""
        if self._printed_block:
            self.out.print()
        print_markdown(self.out, answer_text(block))
        self._printed_block = True

    def _flush(self) -> None:
        """Print the block still waiting for its end (the reply ended, or was cut short)."""
        if self._blocks is not None and (rest := self._blocks.rest()):
            self._block(rest)

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.print()
            self._mid_line = False

    def _show(self, text: str) -> None:
        self._stage = text
        if self._status is None:
            return
        self._end_line()
        # Not highlighted: rich's highlighter takes minutes on a long enough line.
        stage = Text(text, style="dim")
        lines = self.plans.lines()
        self._status.update(Group(*(Text.from_markup(line) for line in lines), stage) if lines else stage)
        self._status.start()

    def _stop_status(self) -> None:
        if self._status is not None:
            self._status.stop()
