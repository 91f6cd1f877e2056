"""At a server's start: the runs a stopped one left pending or running, each settled.

A turn left half done is finished as the run it was (the checkpoint holds each
step; calls a stopped process left running were settled by the request log's
recovery first). A run that waits for answers is `interrupted`; one whose turn
had ended is `success`; one that never started is `error`, said why.
"""

from __future__ import annotations

import logging

from orchestrator.api.run_board import RunBoard
from orchestrator.errors import UserError
from orchestrator.store.runs import RunRow, RunStatus, set_run_status, unsettled_runs
from orchestrator.store.storage import Storage

logger = logging.getLogger(__name__)

NEVER_STARTED = "not run: the server stopped before it started"


async def settle_left_runs(board: RunBoard, storage: Storage) -> list[str]:
    """Settle every run a stopped server left; one line for each, saying what became of it."""
    said: list[str] = []
    for row in await unsettled_runs(storage.database):
        try:
            said.append(await _settle(board, storage, row))
        except UserError as problem:  # its assistant is gone, its session another's...
            await set_run_status(storage.database, row.run_id, user_id=row.user_id, status="error", error=str(problem))
            said.append(f"run {row.run_id}: failed ({problem})")
    return said


async def _settle(board: RunBoard, storage: Storage, row: RunRow) -> str:
    session = board.session(row.assistant_id, row.thread_id, identity=row.user_id)
    if await session.open():
        board.resume(row, session)
        return f"run {row.run_id} of thread {row.thread_id}: resumed"
    status: RunStatus = "interrupted" if await session.pending() else "success"
    error = None
    if row.status == "pending":
        status, error = "error", NEVER_STARTED
    await set_run_status(storage.database, row.run_id, user_id=row.user_id, status=status, error=error)
    return f"run {row.run_id} of thread {row.thread_id}: {error or status}"
