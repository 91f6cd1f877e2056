"""What `chat` and `ask` print as background jobs end: a line each, and the follow-up answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from orchestrator.cli.cost import show_turn_cost
from orchestrator.terminal.render import answer_text

if TYPE_CHECKING:
    from orchestrator.conversation.job_board import BackgroundJob
    from orchestrator.conversation.session import Session, TurnResult
    from orchestrator.runtime import Orchestrator

FOLLOW_UP_KEPT = (
    "the result of job {job_id} is kept for your next message "
    "(follow-up limit ORCHESTRATOR_MAX_FOLLOW_UPS reached, or a question waits for your answer)"
)


def show_background_results(
    runtime: Orchestrator, session: Session, *, out: Console, err: Console, costs: Console | None = None
) -> None:
    """Print each background job as it ends, and the follow-up answer it leads to.

    `costs` is where the follow-up turn's cost line goes (None: not shown).
    """

    def ended(task: BackgroundJob) -> None:
        if task.call.session_id == session.session_id:
            err.print(f"  [dim]job {task.job_id} ({escape(task.tool)}): {task.status}[/dim]")

    def answered(task: BackgroundJob, result: TurnResult | None) -> None:
        if result is None:
            err.print(f"  [dim]{FOLLOW_UP_KEPT.format(job_id=task.job_id)}[/dim]")
        elif result.questions:
            count = len(result.questions)
            err.print(
                f"  [dim]job {task.job_id}'s follow-up waits for your answer to {count} "
                "question(s): they are asked before your next message (/pending lists them)[/dim]"
            )
        else:
            out.print(answer_text(result.answer), markup=False, highlight=False)
            if costs is not None:
                show_turn_cost(result, costs)

    runtime.jobs.listeners.append(ended)
    session.on_follow_up = answered
