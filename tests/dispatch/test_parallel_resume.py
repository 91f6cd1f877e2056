"""A turn of three parallel calls, killed after one ended, re-runs only the other two.

Each call of a model turn is a LangGraph task of its own: its result is saved
in the checkpoint as soon as it ends, so the resumed turn runs only the calls
that had not ended. A call's request id is the same however often it runs, so
the request log holds each call once.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from sqlalchemy import text

from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import start_and_kill
from tests.store.test_recovery import ask_then_open, env_for, lines
from tests.tool_folders import TRIO_TOOL, write_folder

USER = "local"  # the command's default user
THREE_CALLS = [("trio_a", {}), ("trio_b", {}), ("trio_c", {})]


@asynccontextmanager
async def checkpoints(database: Database) -> AsyncIterator[AsyncPostgresSaver]:
    """LangGraph's own reader of the checkpoints the command saves."""
    async with await AsyncConnection.connect(
        database.libpq_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as connection:
        yield AsyncPostgresSaver(connection)  # type: ignore[arg-type]


async def saved_results(saver: AsyncPostgresSaver, session: str) -> list[str]:
    """The calls whose results the session's latest checkpoint holds for the step under way.

    These are the writes a resumed turn applies instead of running their tasks
    again: read through the checkpointer itself, not guessed from table rows.
    """
    saved = await saver.aget_tuple({"configurable": {"thread_id": session}})
    if saved is None:
        return []
    names = []
    for _, channel, value in saved.pending_writes or []:
        if channel == "messages":
            written = value if isinstance(value, list) else [value]
            names += [m.name for m in written if isinstance(m, ToolMessage)]
    return sorted(names)


def replies_by_name(request: dict[str, object]) -> dict[str, dict[str, object]]:
    """The tool messages a model request carried, parsed, by the name of the call they answer."""
    messages: list[dict[str, object]] = request["messages"]  # type: ignore[assignment]
    names = {
        call["id"]: call["function"]["name"]
        for m in messages if m["role"] == "assistant"
        for call in m.get("tool_calls") or []  # type: ignore[union-attr]
    }
    return {
        names[m["tool_call_id"]]: json.loads(str(m["content"]))
        for m in messages if m["role"] == "tool"
    }


async def session_requests(database: Database, session: str) -> list[tuple[str, str, str, str]]:
    """The request log's rows for the session: (call, request id, status, outcome)."""
    async with database.user_transaction(USER) as connection:
        rows = await connection.execute(
            text(
                "SELECT call_name, request_id, status, outcome FROM requests "
                "WHERE session_id = :s ORDER BY call_name"
            ),
            {"s": session},
        )
        return [tuple(row) for row in rows]


async def test_a_turn_killed_after_one_of_three_calls_ended_reruns_only_the_other_two(
    tmp_path: Path, database_url: str, database: Database
):
    runs, started, gate = tmp_path / "runs", tmp_path / "started", tmp_path / "gate"
    code = TRIO_TOOL.format(runs=str(runs), started=str(started), gate=str(gate))
    config = {"name": "trio", "description": "Three actions.", "version": "1", "idempotent": True}
    write_folder(tmp_path / "sub_graphs", "trio", config=config, code=code)
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [
        THREE_CALLS,
        "b and c go on in the background.",  # the interrupted turn, finished after the restart
        "Fine.",  # the new question
        "One of them finished.",  # the follow-up turn of b, and of c
        "One of them finished.",
    ]
    # Strict: a call answered twice, or not at all, in the resumed history is refused.
    with OpenAICompatibleServer(script, strict=True) as server:
        # b and c stay inline however long the kill takes to come: moved to the
        # background, they would let the first process finish the turn.
        env = {**env_for(server, database_url, tmp_path), "ORCHESTRATOR_INLINE_BUDGET_SECONDS": "600"}
        async with checkpoints(database) as saver:

            async def a_saved_and_c_started() -> bool:
                # Killed once a's result is a pending write of the turn's checkpoint,
                # read as LangGraph reads it on resume: that write, not the request
                # log (which records a's end before LangGraph saves the write), is
                # what must spare a's task.
                return (started / "c").exists() and "trio_a" in await saved_results(saver, session)

            b_id = await start_and_kill(tmp_path, session, env, started / "b", ready=a_saved_and_c_started)
            left = await saved_results(saver, session)
        assert left == ["trio_a"], "a's result was saved when a ended, b's and c's never were"
        c_id = (started / "c").read_text()

        # The gate opens once the resumed turn and the new one are done: the
        # resumed turn meets b and c still running again in the background.
        # Opened earlier, their follow-up turns could race the resumed one
        # for the scripted replies.
        returncode, stdout, stderr = await ask_then_open(
            tmp_path, session, env, gate=gate, waiting="waiting for 2 background job(s)"
        )

    assert returncode == 0, stderr
    for name, request in (("trio_b", b_id), ("trio_c", c_id)):
        assert f"{name} ({request}) was left running by a stopped process: running it again" in stderr
    assert "finishing the interrupted turn" in stderr
    # The resumed turn ran b's and c's tasks; a's ended before the kill and was not entered.
    assert "tool trio_b (2/3)" in stderr and "tool trio_c (3/3)" in stderr
    assert "tool trio_a" not in stderr
    assert stdout.splitlines() == script[1:]
    assert len(server.requests) == 5, "one model call before the kill, none repeated after it"
    resumed = replies_by_name(server.requests[1])
    assert resumed["trio_a"]["message"] == "a ran to the end", "a's saved result answered its call"
    assert [resumed[n]["data"]["status"] for n in ("trio_b", "trio_c")] == ["acknowledged"] * 2

    ran = [line.split() for line in lines(runs)]
    assert Counter(name for name, _ in ran) == {"a": 1, "b": 2, "c": 2}, "killed once, each run again once"
    logged = await session_requests(database, session)
    assert [(call, status, outcome) for call, _, status, outcome in logged] == [
        (name, "closed", "completed") for name, _ in THREE_CALLS
    ], "each call once in the request log, ended"
    assert {request for _, request in ran} == {request for _, request, _, _ in logged}
    a_id = logged[0][1]
    assert [s for s, _ in await request_history(database, a_id, user_id=USER)] == [
        "created", "running", "completed", "closed"
    ]
    for request in (b_id, c_id):
        # Run again as a job: queued, then taken by a worker (this `ask`'s own). A worker
        # that takes the job before the handover records it queued leaves no "queued"
        # (`JobRequests.queued`): under load it can.
        history = [s for s, _ in await request_history(database, request, user_id=USER)]
        assert history in (
            ["created", "running", "requeued", "running", "queued", "running", "completed", "closed"],
            ["created", "running", "requeued", "running", "running", "completed", "closed"],
        ), history
