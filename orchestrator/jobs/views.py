"""What the person reads of background jobs: a job as `/jobs` lists it, what closing waits for,
and what became of the jobs of a worker that stopped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from orchestrator.conversation.job_board import BackgroundJob
from orchestrator.store.job_requests import BackgroundCall
from orchestrator.tools.request_log import CallRecord

if TYPE_CHECKING:
    from orchestrator.jobs.stalled import Settled

WAITING_HERE = (
    "{count} background job(s) run in this process: waiting for them to end "
    "(Ctrl-C cancels them; closing the terminal does not)"
)
SETTLED = {
    "requeued": "running it again",
    "failed": "marked failed",
    "cancelled": "cancelled, as asked",
}
# A call's status in the log as `/jobs` shows it: any other (`handed`, `held`, ...) is running.
Shown = Literal["queued", "running", "completed", "failed", "cancelled"]
SHOWN_STATUS: dict[str, Shown] = {
    "queued": "queued", "completed": "completed", "failed": "failed", "cancelled": "cancelled"
}
LEFT_BY_WORKER = "{name} ({request_id}) was left running by a stopped process: {what}"


def settled_line(settled: Settled) -> str:
    """What became of a job whose worker stopped, in one line for the person."""
    call = settled.call
    name = call.call_name if call is not None else "a background call"
    what = SETTLED.get(settled.outcome, settled.outcome)
    return LEFT_BY_WORKER.format(name=name, request_id=settled.job.args.request_id, what=what)


def task_of(call: BackgroundCall, *, user_id: str, waiting: str | None = None) -> BackgroundJob:
    """A background call of the log as `/jobs` shows it (`waiting`: why it waits, if no
    worker can take it)."""
    record = CallRecord(
        request_id=call.request_id,
        parent_request_id=None,
        session_id=call.session_id,
        user_id=user_id,
        tool=call.call_name,
        action=None,
        call_name=call.call_name,
        parameters={},
        background=True,
    )
    status: Shown = SHOWN_STATUS.get(call.status, "running")
    ended = status in ("completed", "failed", "cancelled")
    return BackgroundJob(
        call=record,
        work=None,
        status=status,
        started_at=call.created_at,
        finished_at=call.updated_at if ended else None,
        where=call.ran_on,
        waiting=waiting,
    )
