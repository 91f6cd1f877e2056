"""docs/workers.md names the events `jobs show` prints for a background call (issue 42, item 16)."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path

from orchestrator.jobs.runner import JobRunner
from orchestrator.store.engine import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import call_tools
from tests.jobs.test_handover import open_runtime

DOCS = Path(__file__).resolve().parents[2] / "docs" / "workers.md"


async def test_the_handover_events_are_those_the_docs_name(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    documented = re.search(r"`(created(?: → \w+)+)`", DOCS.read_text())
    assert documented, "docs/workers.md gives the handover's events"
    model = scripted(call_tools(("brewer_brew", {})), "Brewing.")
    runtime, storage, _, _ = await open_runtime(tmp_path, database_url, model)
    runner = JobRunner(runtime, takes_jobs=False)  # the job waits in the queue
    user = f"u-{uuid.uuid4().hex[:6]}"
    try:
        result = await replace(runtime, jobs=runner).session(user_id=user).run("make coffee")
        request_id = result.tool_calls[0].request_id
        history = await request_history(database, request_id, user_id=user)
    finally:
        await runner.close()
        await storage.close()

    assert [status for status, _ in history] == documented.group(1).split(" → ")
