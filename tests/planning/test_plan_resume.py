"""Issue 30: a process killed mid-plan resumes with only the unfinished tasks (real processes).

A finished task is never run again; a task that was running follows the rules of any call:
an idempotent one runs again (in its plan, which needs its result), another fails as
interrupted and the model re-plans.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.plans import PLAN_TOOL
from orchestrator.store import Database
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env, start_and_kill
from tests.tool_folders import WAIT_FOR_GATE, write_folder

STEPS_TOOL = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

RUNS = Path({runs!r})
STARTED = Path({started!r})
GATE = Path({gate!r})


class Named(BaseModel):
    name: str


def note(path: Path, name: str) -> None:
    with path.open("a") as lines:
        lines.write(name + "\\n")


class {cls}(Tool):
    @action(Named)
    async def count(self, params: Named, request: ToolRequest) -> ToolResult:
        \"\"\"Count a run of the named step.\"\"\"
        note(RUNS, params.name)
        return request.result(params.name)

    @action(Named)
    async def hold(self, params: Named, request: ToolRequest) -> ToolResult:
        \"\"\"Start the named step, and finish it once the gate opens.\"\"\"
        note(STARTED, params.name)
        await wait_for(GATE)
        note(RUNS, params.name)
        return request.result(params.name)
""" + WAIT_FOR_GATE


def task(task_id: str, tool: str, name: str, *depends_on: str) -> dict[str, object]:
    return {
        "id": task_id, "description": f"step {name}", "tool": tool, "arguments": {"name": name},
        "depends_on": list(depends_on),
    }


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.process
async def test_a_plan_killed_mid_task_resumes_with_only_its_unfinished_tasks(
    cli, tmp_path: Path, database_url: str, database: Database
):
    runs, started, gate = tmp_path / "runs", tmp_path / "started", tmp_path / "gate"
    paths = {"runs": str(runs), "started": str(started), "gate": str(gate)}
    root = tmp_path / "sub_graphs"
    write_folder(root, "steps", code=STEPS_TOOL.format(cls="Steps", **paths))
    again = {"name": "again", "description": "Safe to run again.", "version": "1", "idempotent": True}
    write_folder(root, "again", config=again, code=STEPS_TOOL.format(cls="Again", **paths))
    first_plan = [
        task("t1", "steps_count", "first"),
        task("t2", "steps_hold", "held"),  # not idempotent: killed while it runs, it fails
        task("t3", "again_hold", "safe"),  # idempotent: killed while it runs, it runs again
        task("t4", "steps_count", "last", "t1", "t2", "t3"),
    ]
    re_plan = [task("t2", "steps_hold", "mended"), task("t4", "steps_count", "last", "t1", "t2", "t3")]
    script = [
        [(PLAN_TOOL, {"goal": "four steps", "tasks": first_plan})],
        [(PLAN_TOOL, {"goal": "the rest", "tasks": re_plan})],
        "All four steps are done.",
    ]
    session = f"s-{uuid.uuid4().hex[:8]}"

    async def t1_ended_and_both_holding() -> bool:
        # t1's end commits with its task's checkpoint writes: from then on it is kept.
        async with database.user_transaction("local") as connection:
            ended = await connection.scalar(
                text("SELECT count(*) FROM requests WHERE session_id = :s AND call_name = 'steps_count'"
                     " AND status = 'closed'"),
                {"s": session},
            )
        return ended == 1 and sorted(lines(started)) == ["held", "safe"]

    with OpenAICompatibleServer(script) as server:
        env = {
            **os.environ, **server_env(server),
            "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none", "HOME": str(tmp_path),
        }
        await start_and_kill(
            tmp_path, session, env, started, ready=t1_ended_and_both_holding, lines="y\ny\nrun it\n"
        )
        gate.write_text("open")

        resumed = cli("chat", "-s", session, cwd=tmp_path, env_extra=server_env(server))

    assert resumed.returncode == 0, resumed.stderr
    assert f"finishing the interrupted turn of session {session}" in resumed.stderr
    assert resumed.stdout.strip() == "All four steps are done."
    assert sorted(lines(runs)) == ["first", "last", "mended", "safe"], "t1 ran once: it had finished"
    assert sorted(lines(started)) == ["held", "mended", "safe", "safe"], (
        "t2 did not start again (it failed as interrupted); t3 did, being idempotent"
    )
    told = json.loads(server.requests[1]["messages"][-1]["content"])
    assert told["error_code"] == "task_failed"
    assert "Task t2 (steps_hold) failed: interrupted: the process running it stopped" in told["message"]
    assert "Done, and kept: t1, t3" in told["message"]
    async with database.user_transaction("local") as connection:
        rows = (
            await connection.execute(
                text("SELECT request_id, parent_request_id, call_name FROM requests WHERE session_id = :s"),
                {"s": session},
            )
        ).all()
    plans = {row.request_id for row in rows if row.call_name == PLAN_TOOL}
    tasks = [row for row in rows if row.call_name != PLAN_TOOL]
    assert len(plans) == 2 and len(tasks) == 5  # t1-t3 (t4 never ran), then t2 and t4
    assert all(row.parent_request_id in plans for row in tasks), "a task's parent is its plan's request"
