"""Small builders shared by the tests."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy import text
from typer.testing import CliRunner

from orchestrator.conversation.session import Session, TurnEvent
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Database
from orchestrator.store.logins import Logins
from orchestrator.store.queue_schema import upgrade_all
from orchestrator.store.requests import RequestLog
from orchestrator.store.storage import Storage
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.tools.context import RunContext

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def make_session(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    **settings: object,
) -> Session:
    """A session on a fresh in-memory graph over `model` and `tools`."""
    runtime = Orchestrator.create(
        load_settings(**settings), model=model, tools=list(tools), checkpointer=InMemorySaver()
    )
    return runtime.session(user_id="tester")


class EventLog(list[TurnEvent]):
    """Collects a turn's events; pass it as `on_event`."""

    def __call__(self, event: TurnEvent) -> None:
        self.append(event)

    def stages(self) -> list[str]:
        return [str(e["stage"]) for e in self if e["kind"] == "status"]

    def tool_phases(self) -> list[tuple[str, int, str]]:
        return [(e["tool"], e["index"], str(e["phase"])) for e in self if e["kind"] == "tool"]


async def migrate(logins: Logins) -> None:
    """Bring the database `logins` reach to the newest schema, the job queue's included."""
    database = Database(logins.owner_url, app_url=logins.app_url)
    try:
        await upgrade_all(database)
    finally:
        await database.close()


def run_cli(
    *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command run in this process (typer's CliRunner), as from `cwd` with no terminal.

    Called from a running event loop (an async test), it runs on a thread of its own.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _invoke(args, cwd=cwd, stdin=stdin, env=env or {})
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_invoke, args, cwd=cwd, stdin=stdin, env=env or {}).result()


def _invoke(
    args: Sequence[str], *, cwd: Path, stdin: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    from orchestrator.cli import app
    from orchestrator.terminal import tty_questions

    # The command handles signals (main thread only): give pytest its own back afterwards.
    in_main = threading.current_thread() is threading.main_thread()
    saved = {number: signal.getsignal(number) for number in SIGNALS} if in_main else {}
    previous_dir, previous_terminal = Path.cwd(), tty_questions.TERMINAL
    tty_questions.TERMINAL = str(cwd / "no-terminal")  # as in CI: questions are read from stdin
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(
            app, list(args), input=stdin, env={"ORCHESTRATOR_HOME": str(cwd), **env}
        )
    finally:
        os.chdir(previous_dir)
        tty_questions.TERMINAL = previous_terminal
        for number, handler in saved.items():
            signal.signal(number, handler)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def run_cli_process(
    *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own with no controlling terminal, its home being `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**cli_env(cwd), **(env or {})},
        timeout=120,
        start_new_session=True,  # no /dev/tty: questions are read from stdin, as in CI
    )


def cli_env(home: Path) -> dict[str, str]:
    """A clean environment for the command, with `home` as its home directory."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ORCHESTRATOR_HOME": str(home),
        "PYTHONIOENCODING": "utf-8",
        # Each command stops the embedded server it was the last to use, as before the warm
        # server: a test about the warm server sets its own idle time.
        "ORCHESTRATOR_DB_IDLE_MINUTES": "0",
        # Each command runs the long way: tests/warm sets its own warm process up.
        "ORCHESTRATOR_WARM_MINUTES": "0",
    }
    if "PYTHONPATH" in os.environ:  # the child runs the code under test, as this process does
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def server_env(server: OpenAICompatibleServer) -> dict[str, str]:
    return {
        "ORCHESTRATOR_MODEL": "openai:test-model",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        "ORCHESTRATOR_MODEL_MAX_RETRIES": "0",
    }


async def start_and_kill(
    tmp_path: Path,
    session: str,
    env: dict[str, str],
    started: Path,
    *,
    ready: Callable[[], Awaitable[bool]] | None = None,
    lines: str = "y\nrun it\n",
) -> str:
    """Run `chat` until the tool started (and `ready()` holds), then SIGKILL it.

    `lines` are its input (by default: approve the one new folder, then the
    message). The id of the request it left running.
    """
    with open(tmp_path / "first.out", "w") as out, open(tmp_path / "first.err", "w") as err:
        first = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "chat", "-s", session],
            stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=tmp_path, env=env, text=True,
        )
        first.stdin.write(lines)
        first.stdin.flush()
        for _ in range(600):
            if started.exists() and (ready is None or await ready()):
                break
            assert first.poll() is None, (tmp_path / "first.err").read_text()
            await asyncio.sleep(0.05)
        first.kill()
        first.wait(timeout=30)
    return started.read_text()


async def closing_order(database: Database, user: str, request_ids: list[str]) -> list[str]:
    async with database.user_transaction(user) as connection:
        rows = await connection.execute(
            text("SELECT request_id FROM request_events WHERE status = 'closed' AND request_id = ANY(:ids) ORDER BY id"),
            {"ids": request_ids},
        )
        return [row[0] for row in rows]


def logged_context(database: Database, session: str) -> RunContext:
    """A tools node's context: its user and session, and the request log."""
    return RunContext(user_id="u1", session_id=session, observer=RequestLog(database))


# The call's place in the graph: the LangGraph task running it.
PLACE = {"configurable": {"checkpoint_ns": "tools:6a1f", "__pregel_task_id": "6a1f"}}


def dispatcher(tools: Sequence[BaseTool], *, max_result_chars: int = 4000) -> Dispatcher:
    """The dispatch pipeline over `tools`, with the default limits but the result size."""
    limits = Limits.from_settings(load_settings(max_tool_result_chars=max_result_chars))
    return Dispatcher(tools, limits=limits)


async def run_call(
    pipeline: Dispatcher, call: ToolCall, context: RunContext, *, config: RunnableConfig | None = None
) -> ToolMessage:
    """One call through the pipeline, answered as the tools node answers it."""
    result = await pipeline.dispatch(pipeline.request(call, context, config=config))
    return pipeline.message(call, result)


@asynccontextmanager
async def storage_for(database_url: str, tmp_path: Path) -> AsyncIterator[Storage]:
    """Storage of its own on `database_url` (no tool folders, no embedder), closed after."""
    settings = load_settings(
        database_url=database_url, data_dir=tmp_path, sub_graphs_dir=tmp_path / "none",
        embeddings="none",
    )
    storage = await Storage.open(settings)
    try:
        yield storage
    finally:
        await storage.close()


TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def tool_json(text: str) -> dict[str, object]:
    """The JSON a model read of a tool result, less the time it was made (checked, then left out:
    every result a tool made carries it, and it differs from run to run)."""
    payload = json.loads(text)
    metadata = payload.get("metadata", {})
    assert TIMESTAMP.fullmatch(metadata.pop("timestamp", "")), f"no timestamp in {text[:200]}"
    if not metadata:
        del payload["metadata"]
    return payload
