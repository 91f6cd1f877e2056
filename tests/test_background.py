"""Background tool calls: acknowledged at once, reported later into the same session."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from pathlib import Path

from langchain_core.messages import SystemMessage
from pydantic import BaseModel
from rich.console import Console

from orchestrator.repl import ChatRepl
from orchestrator.runtime import Runtime
from orchestrator.settings import load_settings
from orchestrator.store import Database, Storage
from orchestrator.store.requests import request_history, request_tree
from orchestrator.testing import OpenAICompatibleServer, call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.adapter import langchain_tools
from orchestrator.tools.config import ToolConfig
from tests.helpers import closing_order, server_env
from tests.tool_folders import three_levels, write_folder


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


def runtime(model, tools, **settings: object) -> Runtime:
    return Runtime.create(load_settings(**settings), model=model, tools=tools)


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
    session.on_follow_up = lambda task, result: follow_ups.append((task.task_id, result.answer))

    first = await session.run("please do the slow work")
    [task] = app.tasks.of_session(session.session_id)
    assert task.status == "running"
    acknowledgement = json.loads(model.received[1][-1].text)
    assert acknowledgement["type"] == "status" and acknowledgement["data"]["task_id"] == task.task_id
    assert first.tool_calls[0].status == "partial"

    second = await session.run("hi")  # another turn while the task runs
    assert second.answer == "Hello! The slow work is still running."

    gate.set()
    await app.tasks.drain()

    assert follow_ups == [(task.task_id, "Done: slow work done.")]
    assert task.status == "completed"
    kinds = [type(m).__name__ for m in await session.history()]
    assert kinds == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
        "HumanMessage", "AIMessage",
        "SystemMessage", "AIMessage",
    ]


async def test_cancel_stops_a_running_task_without_a_follow_up(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "Started.")  # no third step: no follow-up turn
    app = runtime(model, slow_tools(gate, background=True))
    session = app.session(user_id="u")
    await session.run("go")
    [task] = app.tasks.of_session(session.session_id)

    assert app.tasks.cancel(task.task_id)
    await app.tasks.drain()

    assert task.status == "cancelled"
    assert not app.tasks.cancel(task.task_id), "nothing left to cancel"
    assert not app.tasks.cancel("no-such-task")


async def test_an_inline_call_past_its_budget_moves_to_the_background(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "It is taking a while; I'll report back.", "Finished.")
    app = runtime(model, slow_tools(gate), inline_budget_seconds=0.05)
    session = app.session(user_id="u")

    result = await session.run("go")

    assert result.answer == "It is taking a while; I'll report back."
    [task] = app.tasks.of_session(session.session_id)
    gate.set()
    await app.tasks.drain()
    assert task.status == "completed"
    assert isinstance((await session.history())[-2], SystemMessage)


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
        while not GATE.exists():
            await asyncio.sleep(0.02)
        return request.result(params.text)
"""


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
        app = Runtime.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
        session = app.session(user_id=user)
        result = await session.run("start")
        top_id = result.tool_calls[0].request_id
        before = await request_tree(database, top_id, user_id=user)
        gate.write_text("open")
        await app.tasks.drain()
        history = await session.history()
    finally:
        await storage.close()

    assert isinstance(history[-2], SystemMessage) and "has completed" in history[-2].text
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


QUICK_BACKGROUND = {"name": "brewer", "description": "Brews coffee.", "version": "1", "background": True}
QUICK_CODE = """
import asyncio

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Nothing(BaseModel):
    pass


class Brewer(Tool):
    @action(Nothing)
    async def brew(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Brew a pot.\"\"\"
        await asyncio.sleep(0.3)
        return request.result("coffee is ready")
"""


def test_ask_waits_for_its_background_task_and_prints_the_report(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "brewer", config=QUICK_BACKGROUND, code=QUICK_CODE)
    script = [[("brewer_brew", {})], "Brewing now.", "Your coffee is ready."]
    with OpenAICompatibleServer(script + script) as server:
        plain = cli("ask", "make coffee", cwd=tmp_path, stdin="y\n", env_extra=server_env(server))
        as_json = cli("ask", "--json", "make coffee", cwd=tmp_path, env_extra=server_env(server))

    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.splitlines() == ["Brewing now.", "Your coffee is ready."]
    assert "waiting for 1 background task(s)" in plain.stderr
    assert "task " in plain.stderr and "(brewer_brew): completed" in plain.stderr
    body = json.loads(as_json.stdout)
    assert body["answer"] == "Brewing now."
    assert [(f["tool"], f["status"], f["answer"]) for f in body["follow_ups"]] == [
        ("brewer_brew", "completed", "Your coffee is ready.")
    ]


async def test_chat_lists_and_cancels_background_tasks(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "Started.")
    app = runtime(model, slow_tools(gate, background=True))
    session = app.session(user_id="u")
    out, err = io.StringIO(), io.StringIO()
    plain = {"force_terminal": False, "width": 200}
    repl = ChatRepl(runtime=app, session=session, out=Console(file=out, **plain), err=Console(file=err, **plain))
    await session.run("go")
    [task] = app.tasks.of_session(session.session_id)

    await repl.command("/tasks")
    await repl.command(f"/cancel {task.task_id}")
    await app.tasks.drain()
    await repl.command("/tasks")
    await repl.command("/cancel nope")

    listed = out.getvalue().splitlines()
    assert listed[0].startswith(f"{task.task_id}  slow_work  running")
    assert listed[1] == f"cancelling task {task.task_id}"
    assert listed[2].startswith(f"{task.task_id}  slow_work  cancelled")
    assert f"task {task.task_id} (slow_work): cancelled" in err.getvalue()
    assert "No running task nope" in err.getvalue()
