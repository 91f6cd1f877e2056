"""Recovery: calls left running by a killed process are failed, or run again when idempotent."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from sqlalchemy import text

from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env, start_and_kill
from tests.tool_folders import GATED_TOOL, write_folder

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
    assert history == [
        "created", "acknowledged", "running", "requeued", "running", "completed", "closed"
    ]
