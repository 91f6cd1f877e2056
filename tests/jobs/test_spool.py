"""The spool of kept job results: private files, read back as written, a bad one said and left."""

from __future__ import annotations

import logging
import stat
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator.jobs.spool import KeepingLog, Kept, ResultSpool
from orchestrator.store import Database
from orchestrator.store.requests import RequestLog, request_history
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.results import ToolResult

CALL = CallRecord(
    request_id="call/../1",  # a model's id: any characters, never a path
    parent_request_id="turn-1",
    session_id="s-1",
    user_id="local",
    tool="brewer",
    action="brew",
    call_name="brewer_brew",
    parameters={"cups": 2},
    background=True,
)


def test_a_kept_result_is_a_private_file_read_back_as_written_and_dropped(tmp_path: Path):
    spool = ResultSpool.under(tmp_path)
    result = ToolResult(message="coffee is ready", data={"cups": 2}, request_id=CALL.request_id)
    path = spool.keep(Kept(CALL, result))

    assert path.parent == tmp_path / "job-results" and ".." not in path.name
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert spool.kept() == [Kept(CALL, result)]
    spool.drop(CALL.request_id)
    assert spool.kept() == [] and list(path.parent.iterdir()) == []


def test_a_kept_file_that_cannot_be_read_is_said_and_left(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    spool = ResultSpool.under(tmp_path)
    spool.keep(Kept(CALL, ToolResult(message="coffee is ready")))
    bad = tmp_path / "job-results" / "torn.json"
    bad.write_text("{")

    with caplog.at_level(logging.WARNING):
        assert [kept.call for kept in spool.kept()] == [CALL]
    assert f"a kept job result in {bad} cannot be read" in caplog.text
    assert bad.exists()


async def test_a_kept_result_the_log_has_an_end_for_already_is_not_written_and_dropped(
    tmp_path: Path, database: Database
):
    """Another worker settled the job first (failed as interrupted): that end stays, once."""
    call = replace(CALL, request_id=f"call_{uuid.uuid4().hex}", parent_request_id=None)
    log = RequestLog(database)
    assert await log.started(call)
    await log.interrupted(call)
    spool = ResultSpool.under(tmp_path)
    spool.keep(Kept(call, ToolResult(message="coffee is ready", request_id=call.request_id)))

    await KeepingLog(database, spool).record_kept()

    assert spool.kept() == []
    history = await request_history(database, call.request_id, user_id="local")
    assert [status for status, _ in history] == ["created", "acknowledged", "running", "failed", "closed"]
