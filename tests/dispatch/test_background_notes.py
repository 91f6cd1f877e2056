"""Background results: how they reach the model, when their task started, how they are stored."""

from __future__ import annotations

import asyncio
import io
import uuid
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from rich.console import Console
from sqlalchemy import text

from orchestrator.folders.tool_config import ToolConfig
from orchestrator.notes import is_note, note
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import MessageStore
from orchestrator.store.sessions import claim_session
from orchestrator.terminal.render import TurnRenderer
from orchestrator.testing import call_tools
from orchestrator.tools import ToolRequest, ToolResult, action
from tests.dispatch.test_background import Nothing, Slow, runtime, slow_tools


class Timed(Slow):
    """Notes when its work began, then works until the gate opens."""

    began: list[datetime] = []

    @action(Nothing)
    async def work(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Do the timed work."""
        self.began.append(datetime.now(UTC))
        await self.gate.wait()
        return request.result("slow work done", data={"items": 3})


async def test_a_background_result_reaches_the_model_as_a_user_role_note(scripted):
    gate = asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "Started.", "It is done.")
    app = runtime(model, slow_tools(gate, background=True))
    session = app.session(user_id="u")

    await session.run("do the slow work")
    gate.set()
    await app.jobs.drain()

    follow_up = model.received[2]
    assert isinstance(follow_up[0], SystemMessage), "the system prompt comes first"
    assert not any(isinstance(m, SystemMessage) for m in follow_up[1:]), (
        "no system message mid-conversation: many local chat templates refuse one"
    )
    report = follow_up[-1]
    assert isinstance(report, HumanMessage) and is_note(report)
    assert "Background job" in report.text and "slow work done" in report.text


async def test_a_handed_over_calls_task_started_when_the_call_did_and_its_line_says_so(scripted):
    gate = asyncio.Event()
    tool = Timed(gate=gate, began=[])
    config = ToolConfig(name="slow", description="x", version="1")
    model = scripted(call_tools(("slow_work", {})), "It takes a while.", "Done.")
    app = runtime(model, langchain_tools(tool, config=config), inline_budget_seconds=0.05)
    session = app.session(user_id="u")
    err = io.StringIO()
    plain = {"force_terminal": False, "width": 200}
    renderer = TurnRenderer(out=Console(file=io.StringIO(), **plain), err=Console(file=err, **plain))

    await session.run("go", on_event=renderer)
    [task] = app.jobs.of_session(session.session_id)
    gate.set()
    await app.jobs.drain()

    assert task.started_at <= tool.began[0], "its start is the call's, not the handover's"
    assert f"tool slow_work (1/1): moved to the background as job {task.job_id}" in err.getvalue()


async def test_a_background_note_is_stored_as_no_words_of_the_person(database):
    user, session = f"u-{uuid.uuid4().hex}", f"s-{uuid.uuid4().hex}"
    await claim_session(database, session, user_id=user)
    turn = [
        HumanMessage("brew coffee", id=uuid.uuid4().hex),
        note("Background task t1 (brewer_brew) has completed.", kind="background_task"),
        AIMessage("Your coffee is ready.", id=uuid.uuid4().hex),
    ]
    await MessageStore(database).save(turn, session_id=session, user_id=user)

    async with database.user_transaction(user) as connection:
        rows = (
            await connection.execute(
                text("SELECT role, content FROM messages WHERE session_id = :s ORDER BY id"),
                {"s": session},
            )
        ).all()
    roles = {content: role for role, content in rows}
    assert roles["brew coffee"] == "user"
    assert [role for content, role in roles.items() if "Background task t1" in content] == ["system"]
