"""A worker whose database is down, at its start or later: it says so in a line per attempt,
waits longer each time, and takes jobs again once the database is back.

The database is an embedded server of the module's own, reached as an external
one (DATABASE_URL), so that the test, not the worker, stops and starts it.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.store.embedded import embedded_logins, leave_embedded_server
from orchestrator.store.logins import Logins
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import migrate, run_cli
from tests.jobs.processes import (
    JOB_TOOL,
    READY,
    Running,
    ask,
    brewer_config,
    job_env,
    runs,
    started,
    stop,
    until,
)
from tests.tool_folders import write_folder

pytestmark = [pytest.mark.db, pytest.mark.process]

RETRY_LINE = re.compile(
    r"^worker: the database at (?P<where>\S+) does not answer \((?P<reason>[^)]+)\); "
    r"trying again in (?P<seconds>\d+) s$",
    re.M,
)
CALL = [("brewer_brew", {})]


class Outage:
    """The module's own server: stopped and started by the test."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.logins: Logins = self.start()

    def start(self) -> Logins:
        return embedded_logins(self.data_dir)

    def stop(self) -> None:
        leave_embedded_server(self.data_dir)  # its last user: it stops


@pytest.fixture(scope="module")
def outage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outage]:
    server = Outage(tmp_path_factory.mktemp("outage-postgres"))
    asyncio.run(migrate(server.logins))
    yield server
    server.stop()


def _brewer(home: Path, env: dict[str, str]) -> Path:
    """The brewer folder, approved, its gate open: each job ends at once. The file runs are noted in."""
    noted, gate = home / "runs", home / "gate"
    write_folder(
        home / "sub_graphs", "brewer", config=brewer_config(),
        code=JOB_TOOL.format(runs=str(noted), gate=str(gate)),
    )
    gate.write_text("open")
    assert run_cli("tools", "approve", "brewer", cwd=home, env=env).returncode == 0
    return noted


def _retries(running: Running) -> list[re.Match[str]]:
    return list(RETRY_LINE.finditer(running.stderr()))


async def _a_job_runs_on(running: Running, noted: Path, home: Path, env: dict[str, str]) -> None:
    # This ask runs no job itself: the worker must.
    result = ask("make coffee", home=home, env={**env, "ORCHESTRATOR_EMBEDDED_WORKER": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Brewing, on a worker.", "Your coffee is ready."]
    assert [pid for _, pid in runs(noted)][-1] == running.pid


async def test_a_worker_started_while_the_database_is_down_waits_for_it_then_takes_jobs(
    outage: Outage, tmp_path: Path
) -> None:
    script = [CALL, "Brewing, on a worker.", "Your coffee is ready."]
    with OpenAICompatibleServer(script) as server:
        env = job_env(server, outage.logins, tmp_path)
        noted = _brewer(tmp_path, env)
        outage.stop()
        try:
            async with started("worker", home=tmp_path, env=env, name="worker") as running:
                await until(lambda: len(_retries(running)) >= 3, alive=running.process)
                outage.start()
                await until(lambda: READY in running.stderr(), alive=running.process)
                await _a_job_runs_on(running, noted, tmp_path, env)
                assert stop(running) == 0, running.stderr()
        finally:
            outage.start()

    said = running.stderr()
    waits = [int(match["seconds"]) for match in _retries(running)]
    assert waits[:3] == [1, 2, 4], said
    assert all(match["where"].endswith(":5432") for match in _retries(running)), said
    assert "Traceback" not in said, said
    before_ready = said.split(READY, 1)[0].splitlines()
    assert all(RETRY_LINE.match(line) for line in before_ready[:-1]), said


async def test_a_running_worker_whose_database_goes_away_takes_jobs_again_once_it_is_back(
    outage: Outage, tmp_path: Path
) -> None:
    script = [CALL, "Brewing, on a worker.", "Your coffee is ready."] * 2
    with OpenAICompatibleServer(script) as server:
        env = job_env(server, outage.logins, tmp_path)
        noted = _brewer(tmp_path, env)
        try:
            async with started("worker", home=tmp_path, env=env, name="worker", ready=READY) as running:
                await _a_job_runs_on(running, noted, tmp_path, env)
                outage.stop()
                await until(lambda: bool(_retries(running)), alive=running.process)
                outage.start()
                await until(lambda: running.stderr().count(READY) == 2, alive=running.process)
                await _a_job_runs_on(running, noted, tmp_path, env)
                assert stop(running) == 0, running.stderr()
        finally:
            outage.start()

    said = running.stderr()
    assert "Traceback" not in said, said
    assert len(runs(noted)) == 2


async def test_ctrl_c_while_the_worker_waits_for_the_database_ends_it_cleanly(
    outage: Outage, tmp_path: Path
) -> None:
    with OpenAICompatibleServer([]) as server:  # a worker asks no model before a job
        env = job_env(server, outage.logins, tmp_path)
        outage.stop()
        try:
            async with started("worker", home=tmp_path, env=env, name="worker") as running:
                await until(lambda: bool(_retries(running)), alive=running.process)
                running.process.send_signal(signal.SIGINT)
                assert running.process.wait(timeout=120) == 0, running.stderr()
        finally:
            outage.start()
    assert "Traceback" not in running.stderr()
