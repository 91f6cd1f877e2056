"""Recovery: calls left running by a killed process are failed, or run again when idempotent.

A resumed turn re-enters its tools node with the same calls: what the request
log recorded answers them, so a call never runs twice unless it is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from langchain_core.messages import ToolCall
from sqlalchemy import text

from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from tests.dispatch.test_background import Nothing
from tests.helpers import (
    PLACE,
    dispatcher,
    logged_context,
    run_call,
    server_env,
    start_and_kill,
    tool_json,
)
from tests.tool_folders import COUNTED_TOOL, GATED_TOOL, write_folder

WAIT_STEPS = 2400  # polls of 50 ms: two minutes, far past any real wait


async def archived(database: Database, session: str, content: str) -> bool:
    """Whether the session's message `content` is in the archive: its turn is saved to the end."""
    async with database.user_transaction("local") as connection:
        found = await connection.scalar(
            text("SELECT count(*) FROM messages WHERE session_id = :s AND content = :c"),
            {"s": session, "c": content},
        )
    return bool(found)


def env_for(server: OpenAICompatibleServer, database_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ, **server_env(server),
        "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none", "HOME": str(tmp_path),
    }


async def test_a_call_left_running_is_marked_failed_and_the_user_told(
    cli, tmp_path: Path, database_url: str, database: Database
):
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "gated", code=GATED_TOOL.format(started=str(started), gate=str(gate)))
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer([[("gated_run", {})], "It ran.", "Fine."]) as server:
        orphan = await start_and_kill(tmp_path, session, env_for(server, database_url, tmp_path), started)
        gate.write_text("open")
        after = cli("ask", "-s", session, "and now?", cwd=tmp_path, env_extra=server_env(server))

    assert after.returncode == 0, after.stderr
    assert f"gated_run ({orphan}) was left running by a stopped process: marked failed" in after.stderr
    history = await request_history(database, orphan, user_id="local")
    assert [status for status, _ in history] == ["created", "running", "failed", "closed"]
    assert after.stdout.splitlines() == ["It ran.", "Fine."], "the interrupted turn finished, then the new one"


async def test_an_idempotent_background_call_runs_again_and_is_reported(
    cli, tmp_path: Path, database_url: str, database: Database
):
    started, gate = tmp_path / "started", tmp_path / "gate"
    config = {"name": "gated", "description": "Gated.", "version": "1", "background": True, "idempotent": True}
    write_folder(
        tmp_path / "sub_graphs", "gated", config=config, code=GATED_TOOL.format(started=str(started), gate=str(gate))
    )
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [[("gated_run", {})], "Started it in the background.", "Hello.", "The gated run finished."]
    with OpenAICompatibleServer(script) as server:
        # Killed only once the turn is saved to its end: the answer is printed while
        # the last step's checkpoint is still being written.
        orphan = await start_and_kill(
            tmp_path, session, env_for(server, database_url, tmp_path), started,
            ready=lambda: archived(database, session, "Started it in the background."),
        )
        gate.write_text("open")
        after = cli("ask", "-s", session, "hello", cwd=tmp_path, env_extra=server_env(server))

    assert after.returncode == 0, after.stderr
    assert f"gated_run ({orphan}) was left running by a stopped process: running it again" in after.stderr
    assert after.stdout.splitlines() == ["Hello.", "The gated run finished."]
    history = [status for status, _ in await request_history(database, orphan, user_id="local")]
    # A job: taken by the chat's own worker, killed with it, run again by the next command's.
    assert history == [
        "created", "acknowledged", "running", "queued", "running", "requeued", "running",
        "completed", "closed",
    ]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def tool_reply(request: dict[str, object]) -> dict[str, object]:
    """The (last) tool message a model request carried, parsed."""
    message = [m for m in request["messages"] if m["role"] == "tool"][-1]  # type: ignore[index]
    return json.loads(message["content"])


async def test_a_killed_non_idempotent_call_is_never_run_again(
    tmp_path: Path, database_url: str, database: Database
):
    runs, started, gate = tmp_path / "runs", tmp_path / "started", tmp_path / "gate"
    code = COUNTED_TOOL.format(runs=str(runs), started=str(started), gate=str(gate))
    write_folder(tmp_path / "sub_graphs", "counted", code=code)
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer([[("counted_run", {})], "It failed.", "Fine."]) as server:
        env = env_for(server, database_url, tmp_path)
        orphan = await start_and_kill(tmp_path, session, env, started)
        gate.write_text("open")  # a second run would finish now: it must not start at all
        after = subprocess.run(
            [sys.executable, "-m", "orchestrator", "ask", "-s", session, "and now?"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
        )

    assert after.returncode == 0, after.stderr
    note = f"counted_run ({orphan}) was left running by a stopped process: marked failed"
    assert note in after.stderr
    assert "finishing the interrupted turn" in after.stderr
    assert lines(runs) == [orphan], "the call ran once, in the killed process only"
    assert tool_reply(server.requests[1])["error_code"] == "interrupted"
    assert after.stdout.splitlines() == ["It failed.", "Fine."]
    history = [status for status, _ in await request_history(database, orphan, user_id="local")]
    assert history == ["created", "running", "failed", "closed"]


async def test_a_killed_idempotent_call_runs_again_once_not_twice(
    tmp_path: Path, database_url: str, database: Database
):
    runs, started, gate = tmp_path / "runs", tmp_path / "started", tmp_path / "gate"
    code = COUNTED_TOOL.format(runs=str(runs), started=str(started), gate=str(gate))
    config = {"name": "counted", "description": "Counted.", "version": "1", "idempotent": True}
    write_folder(tmp_path / "sub_graphs", "counted", config=config, code=code)
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [[("counted_run", {})], "It goes on in the background.", "Fine.", "It finished."]
    with OpenAICompatibleServer(script) as server:
        env = env_for(server, database_url, tmp_path)
        orphan = await start_and_kill(tmp_path, session, env, started)
        # The gate opens only once the resumed turn and the new one are done,
        # so recovery's re-run is still running when the resumed turn meets the call.
        returncode, stdout, stderr = await ask_then_open(
            tmp_path, session, env, gate=gate, waiting="waiting for 1 background job"
        )

    assert returncode == 0, stderr
    note = f"counted_run ({orphan}) was left running by a stopped process: running it again"
    assert note in stderr
    assert lines(runs) == [orphan, orphan], "killed once; run again by recovery, not by the turn"
    assert tool_reply(server.requests[1])["data"]["status"] == "acknowledged"
    assert stdout.splitlines() == ["It goes on in the background.", "Fine.", "It finished."]


class Counter(Tool):
    name: str = "counter"
    description: str = "Counts its runs."
    runs: int = 0

    @action(Nothing)
    async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Count."""
        self.runs += 1
        return request.result(f"run {self.runs}")


def counter_executor(counter: Counter, *, idempotent: bool = False) -> Dispatcher:
    config = ToolConfig(name="counter", description="x", version="1", idempotent=idempotent)
    return dispatcher(langchain_tools(counter, config=config))


CALL = ToolCall(name="counter_go", args={}, id="call_same", type="tool_call")


async def test_a_call_the_log_saw_end_is_answered_from_the_log(database: Database):
    counter = Counter()
    executor = counter_executor(counter)
    context = logged_context(database, f"s-{uuid.uuid4().hex[:8]}")

    first = await run_call(executor, CALL, context, config=PLACE)
    again = await run_call(executor, CALL, context, config=PLACE)

    assert counter.runs == 1, "the resumed turn's call was not run again"
    assert json.loads(again.text) == json.loads(first.text)
    assert tool_json(again.text) == {"status": "success", "message": "run 1"}
    assert again.artifact["request_id"] == first.artifact["request_id"]


async def set_owner(database: Database, request_id: str, owner: str) -> None:
    """Make the (ended) request look left running by `owner`."""
    async with database.user_transaction("u1") as connection:
        await connection.execute(
            text(
                "UPDATE requests SET status = 'running', outcome = NULL, result = NULL, "
                "error = NULL, closed_at = NULL, owner = :owner WHERE request_id = :id"
            ),
            {"owner": owner, "id": request_id},
        )


DEAD = f"{socket.gethostname()}:999999999:0"  # no such process


def alive_elsewhere() -> str:
    parent = psutil.Process(os.getppid())
    return f"{socket.gethostname()}:{parent.pid}:{parent.create_time():.0f}"


@pytest.mark.parametrize(
    ("owner", "idempotent", "runs", "outcome"),
    [
        (lambda: DEAD, False, 1, "interrupted"),
        (lambda: DEAD, True, 2, None),
        (alive_elsewhere, True, 1, "running"),
    ],
    ids=["dead-owner", "dead-owner-idempotent", "live-owner-elsewhere"],
)
async def test_a_call_left_open_runs_again_only_when_idempotent_and_orphaned(
    database: Database, owner: Callable[[], str], idempotent: bool, runs: int, outcome: str | None
):
    counter = Counter()
    executor = counter_executor(counter, idempotent=idempotent)
    context = logged_context(database, f"s-{uuid.uuid4().hex[:8]}")
    first = await run_call(executor, CALL, context, config=PLACE)
    request_id = first.artifact["request_id"]
    await set_owner(database, request_id, owner())

    again = await run_call(executor, CALL, context, config=PLACE)

    assert counter.runs == runs
    body = tool_json(again.text)
    history = [status for status, _ in await request_history(database, request_id, user_id="u1")]
    if outcome is None:
        assert body == {"status": "success", "message": "run 2"}
        assert history[-4:] == ["requeued", "running", "completed", "closed"]
    else:
        assert body["status"] == "failure" and body["error_code"] == outcome


async def ask_then_open(
    tmp_path: Path, session: str, env: dict[str, str], *, gate: Path, waiting: str
) -> tuple[int, str, str]:
    """`ask -s SESSION "and now?"` in a process of its own; `gate` opens once its stderr says
    `waiting`. Its exit status, output and errors."""
    with open(tmp_path / "after.err", "w") as errors:
        after = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "ask", "-s", session, "and now?"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, text=True, cwd=tmp_path, env=env,
        )
        try:
            await wait_for(lambda: waiting in (tmp_path / "after.err").read_text(), after)
            gate.write_text("open")
            stdout, _ = after.communicate(timeout=120)
        finally:
            after.kill()
    return after.returncode, stdout, (tmp_path / "after.err").read_text()


async def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    """Poll `condition` (a gate, not a guess at a duration) while `process` lives."""
    for _ in range(WAIT_STEPS):
        if condition():
            return
        assert process.poll() is None, "the process ended first"
        await asyncio.sleep(0.05)
    raise AssertionError("gave up waiting")
