"""Sessions outlive their process: continued later, and resumed after a kill mid-turn."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from sqlalchemy import text

from orchestrator.store import Database
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env, start_and_kill
from tests.tool_folders import GATED_TOOL, write_folder


def test_a_session_continues_in_a_new_process(cli, tmp_path: Path):
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer(["Hello Ada.", "Your name is Ada."]) as server:
        first = cli("ask", "-s", session, "My name is Ada", cwd=tmp_path, env_extra=server_env(server))
        second = cli("ask", "-s", session, "What is my name?", cwd=tmp_path, env_extra=server_env(server))

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert second.stdout.strip() == "Your name is Ada."
    seen = [(m["role"], m["content"]) for m in server.requests[1]["messages"]]
    assert seen[-3:] == [("user", "My name is Ada"), ("assistant", "Hello Ada."), ("user", "What is my name?")]


def test_another_user_cannot_take_over_a_session(cli, tmp_path: Path):
    session = f"s-{uuid.uuid4().hex[:8]}"
    assert cli("ask", "-s", session, "-u", "ann", "what is 1+1", cwd=tmp_path).returncode == 0
    taken = cli("ask", "-s", session, "-u", "bob", "what is 2+2", cwd=tmp_path)
    assert taken.returncode == 1
    assert taken.stderr.strip().endswith(f"error: Session {session} belongs to another user; start a new one.")


async def test_a_turn_killed_mid_tool_resumes_without_losing_a_message(
    cli, tmp_path: Path, database_url: str, database: Database
):
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "gated", code=GATED_TOOL.format(started=str(started), gate=str(gate)))
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer([[("gated_run", {})], "The gated run is done."]) as server:
        env = {
            **os.environ, **server_env(server),
            "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none", "HOME": str(tmp_path),
        }
        await start_and_kill(tmp_path, session, env, started)  # SIGKILL while the tool runs
        gate.write_text("open")

        resumed = cli("chat", "-s", session, cwd=tmp_path, env_extra=server_env(server))

    assert resumed.returncode == 0, resumed.stderr
    assert f"finishing the interrupted turn of session {session}" in resumed.stderr
    assert resumed.stdout.strip() == "The gated run is done."
    tool_reply = server.requests[1]["messages"][-1]
    # The call was not idempotent: killed while it ran, it is not run again; the model hears why.
    assert tool_reply["role"] == "tool" and json.loads(tool_reply["content"])["error_code"] == "interrupted"
    async with database.user_transaction("local") as connection:
        stored = (
            await connection.execute(
                text("SELECT role, content FROM messages WHERE session_id = :s ORDER BY id"), {"s": session}
            )
        ).all()
    assert [role for role, _ in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[0][1] == "run it" and stored[-1][1] == "The gated run is done."
