"""Worker processes and commands for the job tests: real `python -m orchestrator` processes.

Every wait is for something a process does (a line it prints, a file its tool
writes, a row the request log holds), with a bound far past any real wait.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from orchestrator.store import Database
from orchestrator.store.logins import Logins
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import cli_env, server_env
from tests.tool_folders import WAIT_FOR_GATE

STEPS = 2400  # polls of 50 ms: two minutes, far past any real wait
READY = "folder content(s)"  # what a worker prints once it takes jobs

# A background tool that notes each run (its request id and the process running it),
# then waits for the test's gate.
JOB_TOOL = """
import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

RUNS = Path({runs!r})
GATE = Path({gate!r})


class Nothing(BaseModel):
    pass


class Brewer(Tool):
    @action(Nothing)
    async def brew(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Brew a pot of coffee.\"\"\"
        with RUNS.open("a") as runs:
            runs.write(request.request_id + " " + str(os.getpid()) + "\\n")
        await wait_for(GATE)
        return request.result("coffee is ready")
""" + WAIT_FOR_GATE


def brewer_config(**extra: object) -> dict[str, object]:
    return {"name": "brewer", "description": "Brews coffee.", "version": "1", "background": True, **extra}


def job_env(server: OpenAICompatibleServer, logins: Logins, home: Path, **extra: str) -> dict[str, str]:
    """A command's environment: the module's database, the test's model server, quick heartbeats."""
    return {
        **cli_env(home),
        "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"],  # the test's installation key, the `cli`'s too
        **server_env(server),
        "DATABASE_URL": logins.owner_url,
        "DATABASE_APP_URL": logins.app_url,
        "ORCHESTRATOR_EMBEDDINGS": "none",
        "ORCHESTRATOR_WORKER_HEARTBEAT_SECONDS": "0.2",
        **extra,
    }


def runs(path: Path) -> list[tuple[str, int]]:
    """The runs a JOB_TOOL noted: (request id, pid), in order."""
    if not path.exists():
        return []
    return [(rid, int(pid)) for rid, pid in (line.split() for line in path.read_text().splitlines())]


async def until(condition: Callable[[], bool | Awaitable[bool]], *, alive: subprocess.Popen[str] | None = None) -> None:
    """Poll `condition` (a gate, not a guess at a duration), while `alive` runs."""
    for _ in range(STEPS):
        held = condition()
        if held if isinstance(held, bool) else await held:
            return
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"the process ended first ({alive.args})")
        await asyncio.sleep(0.05)
    raise AssertionError("gave up waiting")


@dataclass
class Running:
    """A process started by a test, its output in files."""

    process: subprocess.Popen[str]
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()


@asynccontextmanager
async def started(
    *args: str, home: Path, env: dict[str, str], name: str, ready: str | None = None, stdin: bool = False
) -> AsyncIterator[Running]:
    """`python -m orchestrator ARGS` in `home`; once its stderr says `ready`. Killed afterwards."""
    out, err = home / f"{name}.out", home / f"{name}.err"
    with open(out, "w") as out_file, open(err, "w") as err_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=out_file, stderr=err_file, cwd=home, env=env, text=True,
        )
    running = Running(process, out, err)
    try:
        if ready is not None:
            await until(lambda: ready in err.read_text(), alive=process)
        yield running
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)


def worker(
    home: Path, env: dict[str, str], *, name: str = "worker", concurrency: int = 2
) -> AbstractAsyncContextManager[Running]:
    """An `orchestrator worker` process, once it takes jobs."""
    return started("worker", "--concurrency", str(concurrency), home=home, env=env, name=name, ready=READY)


def stop(running: Running) -> int:
    """Stop a worker as Ctrl-C does (it waits for its jobs); its exit status."""
    running.process.send_signal(signal.SIGINT)
    return running.process.wait(timeout=120)


def ask(*args: str, home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`orchestrator ask ARGS` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "ask", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=home, env=env, timeout=120,
    )


async def outcome(database: Database, request_id: str, *, user: str = "local") -> str | None:
    """How the request ended, as the log says (None: not yet)."""
    async with database.user_transaction(user) as connection:
        return await connection.scalar(
            text("SELECT outcome FROM requests WHERE request_id = :r"), {"r": request_id}
        )


def identity(pid: int) -> str:
    """The process identity a worker's `running` event names (see `store.requests.OWNER`)."""
    from orchestrator.store.requests import process_identity

    return process_identity(pid)

