"""Background tool calls: acknowledged at once, reported later into the same session."""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

from langchain_core.messages import HumanMessage
from pydantic import BaseModel
from rich.console import Console

from orchestrator.cli.repl import ChatRepl
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.notes import is_note
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import Database, Storage
from orchestrator.store.requests import request_history, request_tree
from orchestrator.terminal.signals import Interrupts
from orchestrator.testing import OpenAICompatibleServer, call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from tests.helpers import cli_env, closing_order, server_env
from tests.tool_folders import WAIT_FOR_GATE, three_levels, write_folder


class Nothing(BaseModel):
    pass


class Slow(Tool):
    """Works until the test opens its gate."""

    name: str = "slow"
    description: str = "Slow work."
    gate: asyncio.Event

    @action(Nothing)
    async def work(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Do the slow work."""
        await self.gate.wait()
        return request.result("slow work done", data={"items": 3})


def slow_tools(gate: asyncio.Event, **policy: object):
    config = ToolConfig(name="slow", description="x", version="1", **policy)
    return langchain_tools(Slow(gate=gate), config=config)


def runtime(model, tools, **settings: object) -> Orchestrator:
    return Orchestrator.create(load_settings(**settings), model=model, tools=tools)


async def test_a_background_task_is_reported_later_in_the_same_session(scripted):
    gate = asyncio.Event()
    model = scripted(
        call_tools(("slow_work", {})),
        "I started the slow work; I will tell you when it is done.",
        "Hello! The slow work is still running.",
        lambda messages: f"Done: {json.loads(messages[-1].text.split('Its result: ')[1].splitlines()[0])['message']}.",
    )
    app = runtime(model, slow_tools(gate, background=True))
    session = app.session(user_id="u")
    follow_ups = []
    session.on_follow_up = lambda task, result: follow_ups.append((task.job_id, result.answer))

    first = await session.run("please do the slow work")
    [task] = app.jobs.of_session(session.session_id)
    assert task.status == "running"
    acknowledgement = json.loads(model.received[1][-1].text)
    assert acknowledgement["type"] == "status" and acknowledgement["data"]["job_id"] == task.job_id
    assert first.tool_calls[0].status == "partial"

    second = await session.run("hi")  # another turn while the task runs
    assert second.answer == "Hello! The slow work is still running."

    gate.set()
    await app.jobs.drain()

    assert follow_ups == [(task.job_id, "Done: slow work done.")]
    assert task.status == "completed"
    history = await session.history()
    kinds = [type(m).__name__ for m in history]
    assert kinds == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
        "HumanMessage", "AIMessage",
        "HumanMessage", "AIMessage",  # the result: a note in the user's role, no system message
    ]
    assert [is_note(m) for m in history] == [False] * 6 + [True, False]


async def test_cancel_stops_a_running_task_without_a_follow_up(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "Started.")  # no third step: no follow-up turn
    app = runtime(model, slow_tools(gate, background=True))
    session = app.session(user_id="u")
    await session.run("go")
    [task] = app.jobs.of_session(session.session_id)

    assert app.jobs.cancel(task.job_id)
    await app.jobs.drain()

    assert task.status == "cancelled"
    assert not app.jobs.cancel(task.job_id), "nothing left to cancel"
    assert not app.jobs.cancel("no-such-task")


async def test_an_inline_call_past_its_budget_moves_to_the_background(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "It is taking a while; I'll report back.", "Finished.")
    app = runtime(model, slow_tools(gate), inline_budget_seconds=0.05)
    session = app.session(user_id="u")

    result = await session.run("go")

    assert result.answer == "It is taking a while; I'll report back."
    [task] = app.jobs.of_session(session.session_id)
    gate.set()
    await app.jobs.drain()
    assert task.status == "completed"
    report = (await session.history())[-2]
    assert isinstance(report, HumanMessage) and is_note(report)


BACKGROUND_LEAF = {"name": "leaf", "description": "The leaf.", "version": "1", "background": True}
GATED_ECHO = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

GATE = Path({gate!r})


class SayParams(BaseModel):
    text: str


class Leaf(Tool):
    @action(SayParams)
    async def say(self, params: SayParams, request: ToolRequest) -> ToolResult:
        \"\"\"Say it once the gate opens.\"\"\"
        await wait_for(GATE)
        return request.result(params.text)
""" + WAIT_FOR_GATE


async def test_a_tree_with_a_background_leaf_closes_when_the_leaf_does(
    scripted, tmp_path: Path, database_url: str, database: Database
):
    gate = tmp_path / "gate"
    root = tmp_path / "sub_graphs"
    three_levels(root, leaf_config=BACKGROUND_LEAF, leaf_code=GATED_ECHO.format(gate=str(gate)))
    settings = load_settings(
        sub_graphs_dir=root, data_dir=tmp_path / "data", database_url=database_url, embeddings="none"
    )
    model = scripted(
        call_tools(("top_ask", {"request": "go deep"})),
        call_tools(("mid_ask", {"request": "deeper"})),
        call_tools(("leaf_say", {"text": "bottom"})),
        "the leaf is working in the background",
        "mid: the leaf is working",
        "It is under way.",
        "The leaf said bottom.",  # the follow-up turn
    )
    storage = await Storage.open(settings)
    user = f"bea-{uuid.uuid4().hex[:6]}"
    try:
        app = Orchestrator.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
        session = app.session(user_id=user)
        result = await session.run("start")
        top_id = result.tool_calls[0].request_id
        before = await request_tree(database, top_id, user_id=user)
        gate.write_text("open")
        await app.jobs.drain()
        history = await session.history()
    finally:
        await storage.close()

    assert isinstance(history[-2], HumanMessage) and is_note(history[-2])
    assert re.search(r"has completed \(\d{4}-\d\d-\d\dT[\d:]{8}\+00:00\)\.", history[-2].text)
    assert history[-1].text == "The leaf said bottom."

    assert [(n.tool, n.status) for n in before] == [
        ("top", "completed"), ("mid", "completed"), ("leaf", "running")
    ], "the top and mid calls ended, but cannot close while the leaf runs"
    after = await request_tree(database, top_id, user_id=user)
    assert [(n.tool, n.status, n.outcome) for n in after] == [
        ("top", "closed", "completed"), ("mid", "closed", "completed"), ("leaf", "closed", "completed")
    ]
    leaf_id = after[2].request_id
    assert await request_history(database, leaf_id, user_id=user) == [
        ("created", None), ("acknowledged", None), ("running", None), ("completed", None), ("closed", None)
    ]
    order = await closing_order(database, user, [n.request_id for n in after])
    assert order == [leaf_id, after[1].request_id, top_id]


BREWER = {"name": "brewer", "description": "Brews coffee.", "version": "1", "background": True}
BREWER_CODE = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

GATE = Path({gate!r})


class Nothing(BaseModel):
    pass


class Brewer(Tool):
    @action(Nothing)
    async def brew(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Brew a pot.\"\"\"
        await wait_for(GATE)
        return request.result("coffee is ready")
""" + WAIT_FOR_GATE
WAITING = "waiting for 1 background job(s)"


def ask_opening_gate(
    *args: str, gate: Path, cwd: Path, env: dict[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`orchestrator ask ARGS`, opening `gate` once it says it waits for its background task.

    The gated tool is then surely still running when `ask` looks for running
    tasks, however slowly the machine answers. Runs as `run_cli` does.
    """
    run = uuid.uuid4().hex[:6]
    given, errors = cwd / f"ask-{run}.in", cwd / f"ask-{run}.err"
    given.write_text(stdin)
    # run_cli's environment; the orchestrator home is the test's directory, not the checkout
    base = cli_env(cwd)
    with open(given) as source, open(errors, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "ask", "--answers-from-stdin", *args],
            stdin=source, stdout=subprocess.PIPE, stderr=sink, cwd=cwd, env={**base, **env}, text=True,
        )
        try:
            for _ in range(2400):  # two minutes: by then the tool has given up on its gate
                if WAITING in errors.read_text() or process.poll() is not None:
                    break
                time.sleep(0.05)
            gate.write_text("open")
            stdout, _ = process.communicate(timeout=120)
        finally:
            process.kill()  # only if it is still running: a failed test leaves nothing behind
    gate.unlink()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, errors.read_text())


def test_ask_waits_for_its_background_task_and_prints_the_report(tmp_path: Path, database_url: str):
    gate = tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "brewer", config=BREWER, code=BREWER_CODE.format(gate=str(gate)))
    script = [[("brewer_brew", {})], "Brewing now.", "Your coffee is ready."]
    with OpenAICompatibleServer(script + script) as server:
        # what the `cli` fixture sets
        env = {"DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none", **server_env(server)}
        plain = ask_opening_gate("make coffee", gate=gate, cwd=tmp_path, stdin="y\n", env=env)
        as_json = ask_opening_gate("--json", "make coffee", gate=gate, cwd=tmp_path, env=env)

    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines() == ["Brewing now.", "Your coffee is ready."]
    assert WAITING in plain.stderr
    assert "job " in plain.stderr and "(brewer_brew): completed" in plain.stderr
    body = json.loads(as_json.stdout)
    assert body["answer"] == "Brewing now."
    assert [(f["tool"], f["status"], f["answer"]) for f in body["follow_ups"]] == [
        ("brewer_brew", "completed", "Your coffee is ready.")
    ]
    assert body["follow_ups"][0]["job_id"] == body["tool_calls"][0]["request_id"]


class NoLines:
    """No typed lines: the test drives the REPL through `command`."""

    async def readline(self) -> str | None:
        return None


async def test_chat_lists_and_cancels_background_tasks(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "Started.")
    app = runtime(model, slow_tools(gate, background=True))
    session = app.session(user_id="u")
    out, err = io.StringIO(), io.StringIO()
    plain = {"force_terminal": False, "width": 200}
    repl = ChatRepl(
        runtime=app, session=session, lines=NoLines(), interrupts=Interrupts(),
        out=Console(file=out, **plain), err=Console(file=err, **plain),
    )
    await session.run("go")
    [task] = app.jobs.of_session(session.session_id)

    await repl.command("/jobs")
    await repl.command(f"/cancel {task.job_id}")
    await app.jobs.drain()
    await repl.command("/tasks")  # the old name of /jobs
    await repl.command("/cancel nope")

    listed = out.getvalue().splitlines()
    assert listed[0].startswith(f"{task.job_id}  slow_work  running")
    assert listed[1] == f"cancelling job {task.job_id}"
    assert listed[2].startswith(f"{task.job_id}  slow_work  cancelled")
    assert f"job {task.job_id} (slow_work): cancelled" in err.getvalue()
    assert "No running job nope" in err.getvalue()
