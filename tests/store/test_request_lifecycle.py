"""The request lifecycle in the request log: statuses, and closing from the leaves up."""

from __future__ import annotations

import uuid
from pathlib import Path

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Database, Storage
from orchestrator.store.requests import request_history, request_tree
from orchestrator.testing import call_tools
from tests.helpers import closing_order
from tests.tool_folders import three_levels


async def test_a_three_level_tree_closes_from_the_leaf_up(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    root = tmp_path / "sub_graphs"
    three_levels(root)
    settings = load_settings(
        sub_graphs_dir=root, data_dir=tmp_path / "data", database_url=database_url, embeddings="none"
    )
    model = scripted(
        call_tools(("top_ask", {"request": "go deep"})),
        call_tools(("mid_ask", {"request": "deeper"})),
        call_tools(("leaf_say", {"text": "bottom"})),
        "leaf said bottom",
        "mid reports: leaf said bottom",
        "All three levels answered.",
    )
    storage = await Storage.open(settings)
    user = f"lee-{uuid.uuid4().hex[:6]}"
    try:
        runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
        result = await runtime.session(user_id=user).run("start")
    finally:
        await storage.close()

    assert result.answer == "All three levels answered."
    tree = await request_tree(database, result.tool_calls[0].request_id, user_id=user)
    assert [(n.depth, n.tool, n.status, n.outcome) for n in tree] == [
        (0, "top", "closed", "completed"),
        (1, "mid", "closed", "completed"),
        (2, "leaf", "closed", "completed"),
    ]
    top, mid, leaf = (n.request_id for n in tree)
    assert await closing_order(database, user, [top, mid, leaf]) == [leaf, mid, top]
    assert await request_history(database, leaf, user_id=user) == [
        ("created", None), ("running", None), ("completed", None), ("closed", None)
    ]
    assert ("notified", f"{leaf} closed") in await request_history(database, mid, user_id=user)
    assert ("notified", f"{mid} closed") in await request_history(database, top, user_id=user)


async def test_a_call_has_one_end_the_first_recorded(database: Database):
    """A late end (a process that ran on after its call was settled as stopped) writes nothing."""
    from orchestrator.store.requests import RequestLog
    from orchestrator.tools.request_log import CallRecord
    from orchestrator.tools.results import ToolResult

    user = f"one-{uuid.uuid4().hex[:6]}"
    parent, child = uuid.uuid4().hex, uuid.uuid4().hex
    log = RequestLog(database)

    def call(request_id: str, parent_id: str | None) -> CallRecord:
        return CallRecord(
            request_id=request_id, parent_request_id=parent_id, session_id=None, user_id=user,
            tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
        )

    top, below = call(parent, None), call(child, parent)
    await log.started(top)
    await log.started(below)
    for record in (below, top):
        await log.interrupted(record)
        await log.finished(record, ToolResult(message="coffee"))
        await log.cancelled(record)

    for request_id in (parent, child):
        history = [status for status, _ in await request_history(database, request_id, user_id=user)]
        assert history[-2:] == ["failed", "closed"], history
        assert history.count("failed") == 1 and "completed" not in history and "cancelled" not in history
    tree = await request_tree(database, parent, user_id=user)
    assert [(n.status, n.outcome) for n in tree] == [("closed", "failed"), ("closed", "failed")]
