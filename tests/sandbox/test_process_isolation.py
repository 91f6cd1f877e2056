"""Python tool folders with `sandbox: {isolation: process}`: their actions in a held child process.

Real processes: the folder's tool runs in a warm child under Landlock; what
it reports (its process id, the ids it was given) shows what was carried
across.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import select

from orchestrator.sandbox import landlock
from orchestrator.settings import load_settings
from orchestrator.sources.folder_tools import FolderSource
from orchestrator.sources.mcp.sandboxed import DENIAL_NOTE
from orchestrator.store import Database
from orchestrator.store.models import requests
from orchestrator.tools.context import RunContext
from orchestrator.usage.meter import UsageMeter
from tests.helpers import dispatcher, logged_context, run_call
from tests.mcp.test_folders import Person, call, names, started, warnings_about
from tests.tool_folders import write_folder

pytestmark = pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 or later")

HELD_TOOL = '''
import asyncio
import os

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.context import current_context

CANCELLED = []


class Path_(BaseModel):
    path: str


class Nothing(BaseModel):
    pass


class Held(Tool):
    @action(Nothing)
    async def who(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Where it runs and the ids it was given."""
        context = current_context()
        note = self.context.data_dir / "note.txt"
        note.parent.mkdir(parents=True, exist_ok=True)  # made for a held one; inline, at first use
        note.write_text("kept")
        return request.result(
            "here",
            data={
                "pid": os.getpid(),
                "request_id": request.request_id,
                "parent_request_id": request.parent_request_id,
                "context_request_id": context.request_id if context else None,
                "user_id": request.user_id,
                "session_id": request.session_id,
                "data_dir": str(self.context.data_dir),
            },
            billing={"total_cost_usd": 0.5, "credits": 2},
        )

    @action(Path_)
    async def read(self, params: Path_, request: ToolRequest) -> ToolResult:
        """Read a file."""
        with open(params.path, encoding="utf-8") as file:
            return request.result(file.read())

    @action(Nothing)
    async def slow(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Wait until cancelled."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            CANCELLED.append(request.request_id)
            raise
        return request.result("never")

    @action(Nothing)
    async def cancelled(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """The calls that were cancelled here."""
        return request.result(",".join(CANCELLED))

    @action(Nothing)
    async def ask(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Ask the person (which a held process cannot)."""
        from langgraph.types import interrupt

        return request.result(str(interrupt("may I?")))

    @action(Nothing)
    async def search(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Search the user's messages (which stay outside a held process)."""
        context = current_context()
        assert context is not None
        return request.result(str(await context.search_messages("hello")))

    @action(Nothing)
    def crash(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """End the process in the middle of the call."""
        os._exit(3)
'''


def held_folder(sub_graphs: Path, **config: object) -> Path:
    whole = {
        "name": "held",
        "description": "A tool in a process of its own.",
        "version": "1",
        "sandbox": {"isolation": "process"},
        **config,
    }
    return write_folder(sub_graphs, "held", config=whole, code=HELD_TOOL)


def process_of(runtime) -> object:
    source = next(s for s in runtime.sources if isinstance(s, FolderSource))
    return source.loader.processes.processes["held"]


@pytest.mark.process
async def test_actions_run_in_a_held_process_with_ids_billing_and_context_carried(
    tmp_path: Path, database: Database
):
    held_folder(tmp_path / "sub_graphs")
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret")
    usage = UsageMeter()
    context = replace(logged_context(database, "s-held"), usage=usage, request_id="parent-1")

    async with started(Person()) as runtime:
        pipeline = dispatcher(runtime.tools)
        message = await run_call(
            pipeline, {"name": "held_who", "args": {}, "id": "c1", "type": "tool_call"}, context
        )
        stolen = await call(runtime, "held_read", {"path": str(secret)}, context=context)
        process = process_of(runtime)
        pid = process.pid

    result = message.artifact
    data = result["data"]
    assert data["pid"] == pid and data["pid"] != os.getpid()
    assert data["request_id"] == result["request_id"] == data["context_request_id"]
    assert data["parent_request_id"] == "parent-1" == result["parent_request_id"]
    assert (data["user_id"], data["session_id"]) == ("u1", "s-held")
    assert Path(data["data_dir"], "note.txt").read_text() == "kept"
    assert usage.session.tools["held_who"].cost_usd == 0.5
    assert stolen.status == "failure" and "Permission denied" in stolen.message
    assert "the user's secret" not in stolen.message
    async with database.user_transaction("u1") as connection:
        rows = (
            await connection.execute(
                select(requests.c.call_name, requests.c.request_id, requests.c.error).where(
                    requests.c.session_id == "s-held"
                )
            )
        ).all()
    logged = {name: (request_id, error) for name, request_id, error in rows}
    assert logged["held_who"][0] == data["request_id"]
    assert logged["held_read"][1]["metadata"]["sandbox"] == DENIAL_NOTE


@pytest.mark.process
async def test_a_timeout_cancels_the_call_in_the_process_and_a_crash_is_one_failed_call(
    tmp_path: Path,
):
    held_folder(tmp_path / "sub_graphs", timeout_seconds=1)

    async with started(Person()) as runtime:
        slow = await call(runtime, "held_slow", {}, context=RunContext(user_id="u1"))
        cancelled = await call(runtime, "held_cancelled", {})
        first_pid = process_of(runtime).pid
        crashed = await call(runtime, "held_crash", {})
        # Started again before the next call, whose 1 s limit a loaded machine's start of a
        # new process could pass: what is tested is that one comes, not how fast.
        await asyncio.to_thread(process_of(runtime).start_now)  # type: ignore[attr-defined]
        after = await call(runtime, "held_who", {})

    assert slow.status == "failure" and slow.error_code == "timeout", slow
    assert cancelled.status == "success" and cancelled.message == slow.request_id
    assert crashed.status == "failure" and "stopped during the call" in crashed.message
    assert after.status == "success" and after.data["pid"] != first_pid


@pytest.mark.process
async def test_a_held_folder_can_neither_ask_the_person_nor_search_messages_and_says_so(
    tmp_path: Path,
):
    held_folder(tmp_path / "sub_graphs")

    async with started(Person()) as runtime:
        asked = await call(runtime, "held_ask", {})
        searched = await call(runtime, "held_search", {})
        after = await call(runtime, "held_who", {})

    assert asked.status == "failure" and asked.message.startswith("held_ask failed: RuntimeError")
    assert searched.status == "failure" and "needs the orchestrator's database" in searched.message
    assert after.status == "success", "the process goes on"


@pytest.mark.process
async def test_calls_from_other_threads_loops_at_once_each_get_their_own_answer(tmp_path: Path):
    """The child's answers are read on the loop of whoever waits (see `isolated.pipes`): calls
    from several loops at once, and from a loop after another has ended, are all answered."""
    held_folder(tmp_path / "sub_graphs")

    async with started(Person()) as runtime:
        process = process_of(runtime)
        here = await call(runtime, "held_who", {}, context=RunContext(user_id="here"))

        def on_a_loop_of_its_own(user: str) -> list[str | None]:
            async def calls() -> list[str | None]:
                results = await asyncio.gather(
                    *(call(runtime, "held_who", {}, context=RunContext(user_id=user)) for _ in range(3))
                )
                return [r.data["user_id"] if r.status == "success" else r.message for r in results]

            return asyncio.run(calls())

        users = ["a", "b", "c"]
        answered = await asyncio.gather(*(asyncio.to_thread(on_a_loop_of_its_own, u) for u in users))
        again = await call(runtime, "held_who", {}, context=RunContext(user_id="here"))

    assert here.status == "success" and here.data["user_id"] == "here"
    assert answered == [[u, u, u] for u in users]
    assert again.status == "success" and again.data["user_id"] == "here", "its loops ended: read here"
    assert process.starts == 1  # type: ignore[attr-defined]


@pytest.mark.process
async def test_a_required_sandbox_this_machine_cannot_hold_keeps_the_folder_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    import logging

    held_folder(tmp_path / "sub_graphs")
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)

    with caplog.at_level(logging.WARNING):
        async with started(Person(), load_settings(require_sandbox=True)) as runtime:
            offered = names(runtime)

    assert not any(name.startswith("held_") for name in offered)
    assert any("ORCHESTRATOR_REQUIRE_SANDBOX" in m for m in warnings_about(caplog, "held"))
