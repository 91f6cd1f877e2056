"""Background calls as jobs, run by real `orchestrator worker` processes on one database.

Each test starts the commands it needs as processes of their own, as a user
would on several terminals or machines: workers, `chat`, `ask`, and reads what
happened from the request log and from the runs the tool notes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.folders.discovery import content_hash
from orchestrator.store import Database
from orchestrator.store.logins import Logins
from orchestrator.store.requests import request_history
from orchestrator.testing import OpenAICompatibleServer
from tests.jobs.processes import (
    JOB_TOOL,
    ask,
    brewer_config,
    identity,
    job_env,
    outcome,
    runs,
    started,
    stop,
    until,
    worker,
)
from tests.tool_folders import write_folder

pytestmark = pytest.mark.process

CALL = [("brewer_brew", {})]


def brewer(home: Path, **config: object) -> tuple[Path, Path]:
    """The brewer folder in `home`; the files its runs are noted in and its gate."""
    noted, gate = home / "runs", home / "gate"
    write_folder(
        home / "sub_graphs", "brewer", config=brewer_config(**config),
        code=JOB_TOOL.format(runs=str(noted), gate=str(gate)),
    )
    return noted, gate


def statuses(history: list[tuple[str, str | None]]) -> list[str]:
    return [status for status, _ in history]


async def test_a_job_runs_on_a_worker_process_and_its_result_reaches_the_open_chat(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path)
    assert cli("tools", "approve", "brewer", cwd=tmp_path).returncode == 0
    script = [CALL, "Brewing, on a worker.", "Your coffee is ready."]
    with OpenAICompatibleServer(script) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env) as running:
            name = identity(running.pid)
            # This chat runs no job itself: the worker process must.
            chat_env = {**env, "ORCHESTRATOR_EMBEDDED_WORKER": "0"}
            async with started("chat", home=tmp_path, env=chat_env, name="chat", stdin=True) as chat:
                assert chat.process.stdin is not None
                chat.process.stdin.write("make coffee\n")
                chat.process.stdin.flush()
                await until(lambda: bool(runs(noted)), alive=chat.process)
                gate.write_text("open")
                await until(lambda: "Your coffee is ready." in chat.stdout(), alive=chat.process)
                chat.process.stdin.close()
                assert chat.process.wait(timeout=120) == 0, chat.stderr()
            assert stop(running) == 0, running.stderr()

    [(request_id, pid)] = runs(noted)
    assert pid == running.pid, "the worker process ran the call, not the chat"
    assert chat.stdout().splitlines() == ["Brewing, on a worker.", "Your coffee is ready."]
    assert f"job {request_id} (brewer_brew): completed" in chat.stderr()
    history = await request_history(database, request_id, user_id="local")
    assert statuses(history) == [
        "created", "acknowledged", "running", "queued", "running", "completed", "closed"
    ]
    assert history[4] == ("running", name), "the worker's running event names it"
    said = running.stderr()
    assert re.search(rf"^job {request_id} of local started \(queue job \d+\)$", said, re.M), said
    assert re.search(rf"^job {request_id} \(brewer_brew\) completed \(queue job \d+\)$", said, re.M), said


async def test_a_job_that_ends_after_ask_exited_reaches_the_session_when_it_is_opened_again(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path)
    cli("tools", "approve", "brewer", cwd=tmp_path)
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [CALL, "Brewing in the background.", "Your coffee is ready.", "Hello."]
    with OpenAICompatibleServer(script) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env) as running:
            first = ask("--no-wait", "-s", session, "make coffee", home=tmp_path, env=env)
            assert first.returncode == 0, first.stderr
            await until(lambda: bool(runs(noted)))  # running on the worker; ask has exited
            [(request_id, _)] = runs(noted)
            assert await outcome(database, request_id) is None
            gate.write_text("open")
            await until(lambda: _ended(database, request_id))
            again = ask("-s", session, "hello", home=tmp_path, env=env)
            stop(running)

    assert first.stdout.splitlines() == ["Brewing in the background."]
    assert again.returncode == 0, again.stderr
    assert "while you were away:" in again.stderr
    assert f"job {request_id} (brewer_brew): completed" in again.stderr
    assert again.stdout.splitlines() == ["Your coffee is ready.", "Hello."], "the follow-up first"
    report = server.requests[2]["messages"][-1]["content"]
    assert "coffee is ready" in str(report)


async def test_two_workers_run_every_job_exactly_once(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path)
    cli("tools", "approve", "brewer", cwd=tmp_path)
    jobs = 6
    with OpenAICompatibleServer([CALL * jobs, "Six pots on the way."]) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env, name="a") as a, worker(tmp_path, env, name="b") as b:
            workers = {identity(a.pid), identity(b.pid)}
            done = ask("--no-wait", "brew six pots", home=tmp_path, env=env)
            assert done.returncode == 0, done.stderr
            # Two at a time each: four run at once only when both workers have taken jobs.
            await until(lambda: len(runs(noted)) >= 4)
            assert {pid for _, pid in runs(noted)} == {a.pid, b.pid}
            gate.write_text("open")
            await until(lambda: len(runs(noted)) == jobs)
            ids = [rid for rid, _ in runs(noted)]
            for request_id in ids:
                await until(lambda rid=request_id: _ended(database, rid))
            stop(a)
            stop(b)

    assert len(set(ids)) == jobs, "every job ran once: no request id twice in the runs"
    for request_id in ids:
        history = await request_history(database, request_id, user_id="local")
        taken = [detail for status, detail in history if status == "running"][1:]  # after the chat's
        assert len(taken) == 1 and taken[0] in workers, history
        assert statuses(history)[-2:] == ["completed", "closed"]


async def test_a_killed_workers_idempotent_job_runs_again_on_the_other_worker(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path, idempotent=True)
    cli("tools", "approve", "brewer", cwd=tmp_path)
    with OpenAICompatibleServer([CALL, "Brewing."]) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env, name="a", concurrency=1) as a, worker(
            tmp_path, env, name="b", concurrency=1
        ) as b:
            assert ask("--no-wait", "make coffee", home=tmp_path, env=env).returncode == 0
            await until(lambda: bool(runs(noted)))
            [(request_id, first)] = runs(noted)
            killed, other = (a, b) if first == a.pid else (b, a)
            names = identity(killed.pid), identity(other.pid)
            os.kill(killed.pid, signal.SIGKILL)
            killed.process.wait(timeout=60)
            await until(lambda: len(runs(noted)) == 2, alive=other.process)  # the other took it
            gate.write_text("open")
            await until(lambda: _ended(database, request_id))
            stop(other)

    assert [pid for _, pid in runs(noted)] == [killed.pid, other.pid]
    assert await outcome(database, request_id) == "completed"
    history = await request_history(database, request_id, user_id="local")
    assert statuses(history) == [
        "created", "acknowledged", "running", "queued", "running", "requeued", "running",
        "completed", "closed",
    ]
    assert (history[4][1], history[6][1]) == names
    assert "stopped: run again, attempt 2 of 2" in str(history[5][1])


async def test_a_killed_workers_other_job_fails_and_the_user_is_told(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path)
    cli("tools", "approve", "brewer", cwd=tmp_path)
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [CALL, "Brewing.", "The brewing was interrupted, sorry.", "Fine."]
    with OpenAICompatibleServer(script) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env, name="a", concurrency=1) as a, worker(
            tmp_path, env, name="b", concurrency=1
        ) as b:
            assert ask("--no-wait", "-s", session, "make coffee", home=tmp_path, env=env).returncode == 0
            await until(lambda: bool(runs(noted)))
            [(request_id, first)] = runs(noted)
            killed, other = (a, b) if first == a.pid else (b, a)
            os.kill(killed.pid, signal.SIGKILL)
            killed.process.wait(timeout=60)
            gate.write_text("open")  # a second run would end now: there must be none
            await until(lambda: _ended(database, request_id), alive=other.process)
            told = ask("-s", session, "and the coffee?", home=tmp_path, env=env)
            stop(other)

    assert runs(noted) == [(request_id, killed.pid)], "run once, by the killed worker only"
    assert await outcome(database, request_id) == "failed"
    history = await request_history(database, request_id, user_id="local")
    assert statuses(history) == [
        "created", "acknowledged", "running", "queued", "running", "failed", "closed"
    ]
    assert told.returncode == 0, told.stderr
    assert f"job {request_id} (brewer_brew): failed" in told.stderr
    assert told.stdout.splitlines() == ["The brewing was interrupted, sorry.", "Fine."]
    assert '"error_code": "interrupted"' in str(server.requests[2]["messages"][-1]["content"])


async def test_cancel_reaches_the_worker_running_a_job(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, _ = brewer(tmp_path)  # its gate never opens: only the cancellation ends it
    cli("tools", "approve", "brewer", cwd=tmp_path)
    with OpenAICompatibleServer([CALL, "Brewing."]) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env) as running:
            name = identity(running.pid)
            assert ask("--no-wait", "make coffee", home=tmp_path, env=env).returncode == 0
            await until(lambda: bool(runs(noted)))
            [(request_id, _)] = runs(noted)
            listed = cli("jobs", "list", "--json", cwd=tmp_path)
            cancelled = cli("jobs", "cancel", request_id[:10], cwd=tmp_path)
            await until(lambda: _ended(database, request_id), alive=running.process)
            shown = cli("jobs", "show", request_id, cwd=tmp_path)
            assert stop(running) == 0

    [job] = [j for j in json.loads(listed.stdout)["jobs"] if j["job_id"] == request_id]
    assert (job["status"], job["ran_on"]) == ("running", name)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelling job {request_id} on the worker running it" in cancelled.stdout
    assert await outcome(database, request_id) == "cancelled"
    assert statuses(await request_history(database, request_id, user_id="local"))[-2:] == [
        "cancelled", "closed"
    ]
    assert "cancelled" in shown.stdout.splitlines()[0]
    assert len(runs(noted)) == 1


async def test_a_worker_whose_copy_changed_leaves_its_jobs_to_a_worker_that_holds_them(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    here, there = tmp_path / "here", tmp_path / "there"
    noted, gate = brewer(here)
    brewer(there)  # the stale worker's machine: the same folder, for now
    here_tool = here / "sub_graphs" / "brewer" / "brewer_tool.py"
    copy = there / "sub_graphs" / "brewer" / "brewer_tool.py"
    copy.write_text(here_tool.read_text())
    assert cli("tools", "approve", "brewer", cwd=here).returncode == 0  # recorded in the database
    digest = content_hash(here / "sub_graphs" / "brewer")[:12]
    gate.write_text("open")
    with OpenAICompatibleServer([CALL, "Brewing."]) as server:
        async with worker(there, job_env(server, database_logins, there), name="stale") as stale:
            copy.write_text(copy.read_text() + "\n# changed on the worker's machine\n")
            env = job_env(server, database_logins, here, ORCHESTRATOR_EMBEDDED_WORKER="0")
            assert ask("--no-wait", "make coffee", home=here, env=env).returncode == 0
            request_id = await _newest_request(database)
            await until(lambda: "its copy of brewer changed" in stale.stderr(), alive=stale.process)
            # Item 10: no live worker holds the job's content, and `jobs list` says so.
            listed = cli("jobs", "list", "--json", cwd=here)
            job = next(j for j in json.loads(listed.stdout)["jobs"] if j["job_id"] == request_id)
            assert job["status"] == "queued"
            # (Workers of this module's other tests may hold other contents of a `brewer`.)
            held = re.fullmatch(
                rf"waiting: no worker holds brewer at {digest} \(workers hold: (.*)\); "
                r"start a worker on this copy of the folder, or update the workers' folders",
                job["waiting"],
            )
            assert held is not None and digest not in held.group(1), job["waiting"]
            assert "waiting: no worker holds brewer" in cli("jobs", "list", cwd=here).stdout
            async with worker(here, job_env(server, database_logins, here), name="healthy") as healthy:
                name = identity(healthy.pid)
                await until(lambda: _ended(database, request_id), alive=healthy.process)
                assert stop(healthy) == 0
            assert stop(stale) == 0

    assert await outcome(database, request_id) == "completed"
    assert runs(noted) == [(request_id, healthy.pid)], "the changed copy never ran it"
    history = await request_history(database, request_id, user_id="local")
    taken = [detail for status, detail in history if status == "running"][1:]  # after the chat's
    assert taken == [name], history
    assert f"job {request_id} (brewer_brew)" not in stale.stderr(), "nor ended it"
    listed = cli("jobs", "list", "--json", cwd=here)
    job = next(j for j in json.loads(listed.stdout)["jobs"] if j["job_id"] == request_id)
    assert job["waiting"] is None


async def _ended(database: Database, request_id: str) -> bool:
    return await outcome(database, request_id) is not None


async def _newest_request(database: Database) -> str:
    """The brewer request made last (this test's)."""
    async with database.user_transaction("local") as connection:
        return await connection.scalar(
            text(
                "SELECT request_id FROM requests WHERE call_name = 'brewer_brew' "
                "ORDER BY created_at DESC LIMIT 1"
            )
        )


async def test_cancel_in_chat_reaches_the_worker_process_and_jobs_shows_it(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, _ = brewer(tmp_path)  # its gate never opens: only the cancellation ends it
    cli("tools", "approve", "brewer", cwd=tmp_path)
    with OpenAICompatibleServer([CALL, "Brewing."]) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env) as running:
            chat_env = {**env, "ORCHESTRATOR_EMBEDDED_WORKER": "0"}
            async with started("chat", home=tmp_path, env=chat_env, name="chat", stdin=True) as chat:
                assert chat.process.stdin is not None
                chat.process.stdin.write("make coffee\n")
                chat.process.stdin.flush()
                await until(lambda: bool(runs(noted)), alive=chat.process)
                [(request_id, _)] = runs(noted)
                chat.process.stdin.write(f"/jobs\n/cancel {request_id[:8]}\n")
                chat.process.stdin.flush()
                await until(lambda: _ended(database, request_id), alive=chat.process)
                chat.process.stdin.write("/tasks\n")  # the old name of /jobs
                chat.process.stdin.close()
                assert chat.process.wait(timeout=120) == 0, chat.stderr()
            assert stop(running) == 0

    assert await outcome(database, request_id) == "cancelled"
    lines = chat.stdout().splitlines()
    assert lines[0] == "Brewing."
    assert lines[1].startswith(f"{request_id}  brewer_brew  running on ")
    assert lines[2] == f"cancelling job {request_id}"
    assert lines[3].startswith(f"{request_id}  brewer_brew  cancelled")


async def test_closing_the_terminal_does_not_cancel_a_job_the_chat_runs(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path)
    cli("tools", "approve", "brewer", cwd=tmp_path)
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [CALL, "Brewing, here.", "Your coffee is ready.", "Hello."]
    with OpenAICompatibleServer(script) as server:
        env = job_env(server, database_logins, tmp_path)  # the chat runs jobs itself: no worker
        chat_args = ("chat", "-s", session)
        async with started(*chat_args, home=tmp_path, env=env, name="chat", stdin=True) as chat:
            assert chat.process.stdin is not None
            chat.process.stdin.write("make coffee\n/jobs\n")
            chat.process.stdin.flush()
            await until(lambda: bool(runs(noted)), alive=chat.process)
            [(request_id, pid)] = runs(noted)
            # /jobs answered: the turn ended ("Brewing, here." kept in the session), as the chat
            # reads its lines one after the other; the next replies are the next command's.
            await until(lambda: len(chat.stdout().splitlines()) >= 2, alive=chat.process)
            chat.process.send_signal(signal.SIGHUP)  # the terminal closed
            await until(lambda: "waiting for them to end" in chat.stderr(), alive=chat.process)
            assert await outcome(database, request_id) is None, "still running"
            gate.write_text("open")
            assert chat.process.wait(timeout=120) == 128 + signal.SIGHUP, chat.stderr()
            assert await outcome(database, request_id) == "completed", chat.stderr()
        again = ask("-s", session, "hello", home=tmp_path, env=env)

    assert pid == chat.pid, "the chat's own worker ran it"
    assert await outcome(database, request_id) == "completed"
    assert "1 background job(s) run in this process: waiting for them to end" in chat.stderr()
    # No one had the session open when it ended: the next command reports it.
    assert again.returncode == 0, again.stderr
    assert "while you were away:" in again.stderr, again.stderr
    assert f"job {request_id} (brewer_brew): completed" in again.stderr, again.stderr
    assert again.stdout.splitlines() == ["Your coffee is ready.", "Hello."], again.stderr


LOADED_AFTER = """
import sys
from orchestrator.launch import main
try:
    main()
except SystemExit:
    pass
print("queue loaded:", "procrastinate" in sys.modules)
"""


def test_a_command_that_makes_no_job_never_loads_the_queue(tmp_path: Path, database_logins: Logins):
    with OpenAICompatibleServer([[("calculator", {"expression": "6*7"})], "42."]) as server:
        done = subprocess.run(
            [sys.executable, "-c", LOADED_AFTER, "ask", "what is 6*7"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=tmp_path, timeout=120,
            env=job_env(server, database_logins, tmp_path),
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["42.", "queue loaded: False"], done.stderr


async def test_a_call_the_chat_holds_ends_once_when_the_chat_waits_for_it_at_exit(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    """It outlived its inline budget: the chat runs it as a job of its own, and its worker,
    stopping, still runs it; no worker (the test's look, a worker process's) takes it for left."""
    from orchestrator.jobs.queue import JobQueue
    from orchestrator.jobs.stalled import settle_stalled
    from orchestrator.store.requests import RequestLog

    noted, gate = brewer(tmp_path, background=False)
    cli("tools", "approve", "brewer", cwd=tmp_path)
    with OpenAICompatibleServer([CALL, "Brewing, here."]) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env) as running:
            # It holds the call (no budget: at once), and takes no job.
            chat_env = {**env, "ORCHESTRATOR_EMBEDDED_WORKER": "0", "ORCHESTRATOR_INLINE_BUDGET_SECONDS": "0"}
            async with started("chat", home=tmp_path, env=chat_env, name="chat", stdin=True) as chat:
                assert chat.process.stdin is not None
                chat.process.stdin.write("make coffee\n/jobs\n")
                chat.process.stdin.flush()
                await until(lambda: bool(runs(noted)), alive=chat.process)
                [(request_id, pid)] = runs(noted)
                # /jobs answered: the turn ended (its lines are read one after the other).
                await until(lambda: len(chat.stdout().splitlines()) >= 2, alive=chat.process)
                chat.process.stdin.close()  # /exit: the chat waits for the call it runs
                await until(lambda: "waiting for them to end" in chat.stderr(), alive=chat.process)
                since = await _now(database)
                await until(lambda: _beat_since_or_left(database, request_id, since), alive=chat.process)
                queue = JobQueue(database)
                await queue.open()
                try:  # another worker's look: its worker is stopping, not stopped
                    settled = await settle_stalled(queue, RequestLog(database), seconds=3600)
                finally:
                    await queue.close()
                gate.write_text("open")
                assert chat.process.wait(timeout=120) == 0, chat.stderr()
            assert stop(running) == 0, running.stderr()

    assert pid == chat.pid, "the chat ran it"
    assert [done.job.args.request_id for done in settled] == []
    history = statuses(await request_history(database, request_id, user_id="local"))
    assert history == ["created", "running", "acknowledged", "held", "completed", "closed"], history
    assert "stopped process" not in chat.stderr() + running.stderr()


async def _now(database: Database) -> object:
    async with database.admin_transaction() as connection:
        return await connection.scalar(text("SELECT now()"))


async def _beat_since_or_left(database: Database, request_id: str, since: object) -> bool:
    """Whether the worker holding the call said it is alive twice (0.2 s heartbeats) after
    `since`, or has left the queue: either way, it began to stop (which ends procrastinate's
    own heartbeats) before that."""
    async with database.admin_transaction() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT w.id AS worker, w.last_heartbeat > :since + interval '0.4 seconds' AS beat "
                    "FROM job_queue.procrastinate_jobs j "
                    "LEFT JOIN job_queue.procrastinate_workers w ON w.id = j.worker_id "
                    "WHERE j.args ->> 'request_id' = :r"
                ),
                {"r": request_id, "since": since},
            )
        ).first()
    return row is not None and (row.worker is None or bool(row.beat))


async def test_ask_no_wait_hands_a_call_past_its_budget_to_a_worker_and_returns_at_once(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path, background=False, idempotent=True)  # gate opens after ask ended
    cli("tools", "approve", "brewer", cwd=tmp_path)
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer([CALL, "Brewing, on a worker."]) as server:
        env = job_env(server, database_logins, tmp_path)
        async with worker(tmp_path, env) as running:
            asked = ask(
                "--no-wait", "-s", session, "make coffee", home=tmp_path,
                env={**env, "ORCHESTRATOR_INLINE_BUDGET_SECONDS": "0"},  # past its budget at once
            )
            await until(lambda: len(runs(noted)) == 2)  # the worker runs it again
            [(request_id, here), (again, there)] = runs(noted)
            gate.write_text("open")
            await until(lambda: _ended(database, request_id))
            assert stop(running) == 0, running.stderr()

    assert asked.returncode == 0, asked.stderr
    assert (again, there) == (request_id, running.pid) and here != there, "begun in ask, run on the worker"
    assert asked.stdout.splitlines() == ["Brewing, on a worker."]
    assert f"brewer_brew ({request_id}) outlived its inline budget: handed to a worker" in asked.stderr
    assert f"1 background job(s) go on in workers: their results report into session {session}" in asked.stderr
    assert "WARNING" not in asked.stderr and "psycopg" not in asked.stderr, asked.stderr
    assert await outcome(database, request_id) == "completed"
    history = statuses(await request_history(database, request_id, user_id="local"))
    assert history == [
        "created", "running", "acknowledged", "queued", "running", "completed", "closed"
    ], history



async def test_ask_no_wait_says_why_a_call_past_its_budget_cannot_go_to_a_worker(
    cli, tmp_path: Path, database_logins: Logins, database: Database
):
    noted, gate = brewer(tmp_path, background=False)  # not idempotent: a worker would run it again
    cli("tools", "approve", "brewer", cwd=tmp_path)
    with OpenAICompatibleServer([CALL, "Brewing, here."]) as server:
        env = {**job_env(server, database_logins, tmp_path), "ORCHESTRATOR_INLINE_BUDGET_SECONDS": "0"}
        args = ("ask", "--no-wait", "make coffee")
        async with started(*args, home=tmp_path, env=env, name="ask") as asked:
            await until(lambda: "waiting for them to end" in asked.stderr(), alive=asked.process)
            gate.write_text("open")
            assert asked.process.wait(timeout=120) == 0, asked.stderr()

    [(request_id, pid)] = runs(noted)
    assert pid == asked.pid
    assert asked.stdout().splitlines() == ["Brewing, here."]
    assert (
        f"brewer_brew ({request_id}) outlived its inline budget and cannot go to a worker "
        "(its folder does not say `idempotent: true`, and a worker would run it again): "
        "this process runs it to its end"
    ) in " ".join(asked.stderr().split())
    assert "WARNING" not in asked.stderr() and "psycopg" not in asked.stderr(), asked.stderr()
    assert await outcome(database, request_id) == "completed"
