"""`orchestrator jobs list|show|cancel`, and `orchestrator tasks`, its old name, kept as a hidden alias."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from orchestrator.store import Database
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.requests import RequestLog
from orchestrator.store.sessions import claim_session
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.results import ToolResult


async def _ended_job(database: Database, *, user: str, session: str) -> str:
    """A background call of `user` that a worker ran and that has ended; its id."""
    request_id = f"job-{uuid.uuid4().hex[:12]}"
    await claim_session(database, session, user_id=user)
    call = CallRecord(
        request_id=request_id, parent_request_id=None, session_id=session, user_id=user,
        tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
    )
    log = RequestLog(database)
    await log.started(call)
    await JobRequests(database).take(request_id, user_id=user, job_id=7, worker="a worker")
    await log.finished(call, ToolResult(message="coffee is ready", request_id=request_id))
    return request_id


async def test_jobs_lists_shows_and_refuses_to_cancel_an_ended_job(cli, tmp_path: Path, database: Database):
    user, session = f"u-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:6]}"
    request_id = await _ended_job(database, user=user, session=session)

    listed = cli("jobs", "list", "--user", user, "--json", cwd=tmp_path)
    shown = cli("jobs", "show", request_id[:10], "--user", user, cwd=tmp_path)
    cancelled = cli("jobs", "cancel", request_id, "--user", user, cwd=tmp_path)
    missing = cli("jobs", "show", "nope", "--user", user, cwd=tmp_path)
    none = cli("jobs", "list", "--user", f"{user}-x", cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    [job] = json.loads(listed.stdout)["jobs"]
    assert {"job_id", "session_id", "tool", "status", "ran_on", "message", "queue_job_id"} <= job.keys()
    assert (job["job_id"], job["queue_job_id"], job["tool"], job["status"]) == (
        request_id, 7, "brewer_brew", "completed"
    )
    assert shown.returncode == 0 and shown.stdout.startswith(f"{request_id}  session {session}  brewer_brew")
    assert cancelled.returncode != 0 and f"Job {request_id} has ended already (completed)" in cancelled.stderr
    assert missing.returncode != 0
    assert f"No background job nope of user {user}; `orchestrator jobs list` shows them." in missing.stderr
    assert none.stdout.strip() == f"No background jobs of {user}-x."


async def test_tasks_is_the_old_name_of_jobs_and_works_the_same(cli, tmp_path: Path, database: Database):
    user, session = f"u-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:6]}"
    request_id = await _ended_job(database, user=user, session=session)

    for args in (("list", "--json"), ("show", request_id), ("cancel", request_id)):
        as_jobs = cli("jobs", *args, "--user", user, cwd=tmp_path)
        as_tasks = cli("tasks", *args, "--user", user, cwd=tmp_path)
        assert (as_tasks.returncode, as_tasks.stdout, as_tasks.stderr) == (
            as_jobs.returncode, as_jobs.stdout, as_jobs.stderr
        ), args
    listed_help = cli("--help", cwd=tmp_path).stdout
    assert " jobs " in listed_help and " tasks " not in listed_help, "the alias is hidden"
