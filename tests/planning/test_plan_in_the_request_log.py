"""A plan's call in the request log (issue 42, item 13): it ends when its tasks have, and
closes after them, as every parent does."""

from __future__ import annotations

import uuid
from pathlib import Path

from orchestrator.plans import PLAN_TOOL
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Database, Storage
from orchestrator.store.requests import request_history, request_tree
from tests.helpers import closing_order
from tests.planning.test_plan_runs import plan_call, task
from tests.tool_folders import write_folder


async def test_a_plans_request_closes_after_its_tasks(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    write_folder(tmp_path / "sub_graphs", "echo")
    settings = load_settings(
        sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data",
        database_url=database_url, embeddings="none",
    )
    model = scripted(
        plan_call(task("t1", "echo_say", text="one"), task("t2", "echo_say", ("t1",), text="two")),
        "Both said.",
    )
    user = f"pia-{uuid.uuid4().hex[:6]}"
    storage = await Storage.open(settings)
    try:
        runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
        result = await runtime.session(user_id=user).run("say one, then two")
    finally:
        await storage.close()

    assert result.answer == "Both said."
    [planned] = [call for call in result.tool_calls if call.name == PLAN_TOOL]
    tree = await request_tree(database, planned.request_id, user_id=user)
    assert [(n.depth, n.tool, n.status, n.outcome) for n in tree] == [
        (0, PLAN_TOOL, "closed", "completed"),
        (1, "echo", "closed", "completed"),
        (1, "echo", "closed", "completed"),
    ]
    plan, first, second = (n.request_id for n in tree)
    assert (await closing_order(database, user, [plan, first, second]))[-1] == plan
    history = await request_history(database, plan, user_id=user)
    assert [status for status, _ in history if status in ("completed", "closed")] == [
        "completed", "closed"
    ], "one end, after the tasks"
    assert ("notified", f"{second} closed") in history
