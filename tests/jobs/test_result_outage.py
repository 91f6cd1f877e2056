"""A job that ends while the database is down: its result is kept, then recorded once.

Real processes on a PostgreSQL of the test's own, stopped while the job runs
(the job's gate opens only once it is down) and started again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.jobs.spool import SPOOL_FOLDER
from orchestrator.store import Database
from orchestrator.store.embedded import (
    embedded_logins,
    leave_embedded_server,
    revive_embedded_server,
)
from orchestrator.store.logins import Logins
from orchestrator.store.postmaster import PGDATA, fast_shutdown, running_postmaster
from orchestrator.store.queue_schema import upgrade_all
from orchestrator.store.requests import request_history
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import run_cli
from tests.jobs.processes import (
    JOB_TOOL,
    ask,
    brewer_config,
    job_env,
    outcome,
    runs,
    started,
    until,
    worker,
)
from tests.tool_folders import write_folder

pytestmark = pytest.mark.process

CALL = [("brewer_brew", {})]


@dataclass
class Server:
    """A PostgreSQL of the test's own, which it stops and starts."""

    data_dir: Path
    logins: Logins

    def stop(self) -> None:
        postmaster = running_postmaster(self.data_dir.resolve() / PGDATA)
        assert postmaster is not None
        fast_shutdown(postmaster.process, self.data_dir.resolve() / PGDATA)

    def start(self) -> None:
        assert revive_embedded_server(self.data_dir)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    data_dir = tmp_path / "postgres"
    logins = await asyncio.to_thread(embedded_logins, data_dir, database="jobs")
    database = Database(logins.owner_url, app_url=logins.app_url)
    try:
        await upgrade_all(database)
    finally:
        await database.close()
    try:
        yield Server(data_dir, logins)
    finally:
        await asyncio.to_thread(leave_embedded_server, data_dir)


def kept_files(home: Path) -> list[Path]:
    folder = home / "data" / SPOOL_FOLDER
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


async def until_ended(database: Database, request_id: str) -> None:
    async def ended() -> bool:
        try:
            return await outcome(database, request_id) is not None
        except Exception:  # the database is coming back
            return False

    await until(ended)


async def turn_archived(database: Database, answer: str) -> bool:
    """Whether the chat's answer `answer` is archived (a turn's last write)."""
    async with database.user_transaction("local") as connection:
        found = await connection.scalar(
            text("SELECT count(*) FROM messages WHERE role = 'assistant' AND content = :a"), {"a": answer}
        )
    return bool(found)


async def a_job_ends_while_the_database_is_down(home: Path, server: Server) -> tuple[str, Path]:
    """Once the brewer's job runs: stop the database, let the job end; its request id and kept file."""
    await until(lambda: bool(runs(home / "runs")))
    [(request_id, _)] = runs(home / "runs")
    await asyncio.to_thread(server.stop)
    (home / "gate").write_text("open")  # it ends now, with no database to record it in
    await until(lambda: bool(kept_files(home)))
    [kept] = kept_files(home)
    return request_id, kept


def brewer(home: Path, logins: Logins) -> None:
    write_folder(
        home / "sub_graphs", "brewer", config=brewer_config(),
        code=JOB_TOOL.format(runs=str(home / "runs"), gate=str(home / "gate")),
    )
    env = {"DATABASE_URL": logins.owner_url, "DATABASE_APP_URL": logins.app_url, "ORCHESTRATOR_EMBEDDINGS": "none"}
    assert run_cli("tools", "approve", "brewer", cwd=home, env=env).returncode == 0


async def assert_completed_once(database: Database, request_id: str, home: Path, worker_pid: int) -> None:
    assert runs(home / "runs") == [(request_id, worker_pid)], "it ran once"
    assert await outcome(database, request_id) == "completed"
    history = await request_history(database, request_id, user_id="local")
    assert [status for status, _ in history] == [
        "created", "acknowledged", "running", "queued", "running", "completed", "closed"
    ]
    async with database.user_transaction("local") as connection:
        result = await connection.scalar(
            text("SELECT result ->> 'message' FROM requests WHERE request_id = :r"), {"r": request_id}
        )
    assert result == "coffee is ready"
    assert kept_files(home) == [], "the kept result is dropped once recorded"


async def test_a_job_that_ends_while_the_database_is_down_is_recorded_as_completed_once_it_is_back(
    tmp_path: Path, server: Server
):
    """The open chat that started the job gets its result once the database is back."""
    brewer(tmp_path, server.logins)
    script = [CALL, "Brewing.", "Your coffee is ready."]
    database = Database(server.logins.owner_url, app_url=server.logins.app_url)
    with OpenAICompatibleServer(script) as model:
        env = job_env(model, server.logins, tmp_path)
        chat_env = {**env, "ORCHESTRATOR_EMBEDDED_WORKER": "0"}  # the worker process runs it
        try:
            async with worker(tmp_path, env, concurrency=1) as running, started(
                "chat", home=tmp_path, env=chat_env, name="chat", stdin=True
            ) as chat:
                assert chat.process.stdin is not None
                chat.process.stdin.write("make coffee\n")
                chat.process.stdin.flush()
                # The chat's turn ends before the database goes: it is the job's end that meets
                # the outage, not the turn's last writes (its answer, archived last).
                await until(lambda: turn_archived(database, "Brewing."), alive=chat.process)
                request_id, kept = await a_job_ends_while_the_database_is_down(tmp_path, server)
                assert stat.S_IMODE(kept.stat().st_mode) == 0o600
                assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
                await asyncio.to_thread(server.start)
                await until(lambda: "Your coffee is ready." in chat.stdout(), alive=chat.process)
                await until(lambda: "is recorded" in running.stderr())
                chat.process.stdin.close()
                assert chat.process.wait(timeout=120) == 0, chat.stderr()
            await assert_completed_once(database, request_id, tmp_path, running.pid)
        finally:
            await database.close()

    said = running.stderr()
    assert f"job {request_id}: its result is kept in" in said
    assert said.count(f"job {request_id}: its result, kept while the database was away, is recorded") == 1
    assert f"job {request_id} (brewer_brew): completed" in chat.stderr()
    assert "coffee is ready" in str(model.requests[2]), "the follow-up turn hears the result"


async def test_a_kept_result_outlives_its_worker_and_wins_over_the_stalled_job_recovery(
    tmp_path: Path, server: Server
):
    """Killed while it kept the result, the worker's job is recorded by the next worker as it
    ended: completed, not failed as interrupted, and not run again."""
    brewer(tmp_path, server.logins)
    session = f"s-{uuid.uuid4().hex[:8]}"
    database = Database(server.logins.owner_url, app_url=server.logins.app_url)
    script = [CALL, "Brewing.", "Your coffee is ready.", "Enjoy."]
    with OpenAICompatibleServer(script) as model:
        env = job_env(model, server.logins, tmp_path)
        try:
            async with worker(tmp_path, env, name="first", concurrency=1) as first:
                assert ask("--no-wait", "-s", session, "make coffee", home=tmp_path, env=env).returncode == 0
                request_id, _ = await a_job_ends_while_the_database_is_down(tmp_path, server)
                os.kill(first.pid, signal.SIGKILL)
                first.process.wait(timeout=60)
            await asyncio.to_thread(server.start)
            async with worker(tmp_path, env, name="second", concurrency=1):
                await until_ended(database, request_id)
            await assert_completed_once(database, request_id, tmp_path, first.pid)
            told = ask("-s", session, "and the coffee?", home=tmp_path, env=env)
        finally:
            await database.close()

    assert told.returncode == 0, told.stderr
    assert f"job {request_id} (brewer_brew): completed" in told.stderr
    assert "coffee is ready" in str(model.requests[2]), "the follow-up turn hears the result"
