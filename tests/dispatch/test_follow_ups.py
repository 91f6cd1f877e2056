"""Follow-up turns of background tasks are bounded: a task that starts another cannot chain forever."""

from __future__ import annotations

import asyncio

from langchain_core.messages import HumanMessage

from orchestrator.folders.tool_config import ToolConfig
from orchestrator.graph.prompts import FOLLOW_UP_LIMIT
from orchestrator.notes import is_note
from orchestrator.sources.adapter import langchain_tools
from orchestrator.testing import call_tools
from orchestrator.tools import ToolRequest, ToolResult, action
from tests.dispatch.test_background import Nothing, Slow, runtime, slow_tools


async def test_past_the_limit_a_result_waits_for_the_next_message(scripted):
    gate = asyncio.Event()
    gate.set()  # every task ends at once, and each follow-up starts the next one
    def again():  # a new message each time: one id twice would replace the first
        return call_tools(("slow_work", {}))

    model = scripted(
        again(), "Started.",
        again(), "Started again.",
        again(), "And again.",
        lambda messages: "The third one is done too." if FOLLOW_UP_LIMIT in messages[-2].text else "?",
    )
    app = runtime(model, slow_tools(gate, background=True), max_follow_ups=2)
    session = app.session(user_id="u")
    reports = []
    session.on_follow_up = lambda task, result: reports.append(result and result.answer)

    await session.run("keep working")
    await app.jobs.drain()

    assert reports == ["Started again.", "And again.", None], "the third result got no turn"
    history = await session.history()
    assert isinstance(history[-1], HumanMessage) and is_note(history[-1])
    assert history[-1].text.endswith(FOLLOW_UP_LIMIT)
    assert "slow work done" in history[-1].text, "the result is kept in the conversation"
    assert not (await app.graph.aget_state(session.config)).next, "the turn is closed"

    answer = await session.run("anything new?")
    assert answer.answer == "The third one is done too."


class Held(Slow):
    """Tells the test it started, then works until the gate opens."""

    name: str = "held"
    entered: asyncio.Event

    @action(Nothing)
    async def work(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Do the held work."""
        self.entered.set()
        await self.gate.wait()
        return request.result("held work done")


async def test_a_follow_up_turn_in_progress_is_not_an_unfinished_turn(scripted):
    done, entered, held = asyncio.Event(), asyncio.Event(), asyncio.Event()
    model = scripted(call_tools(("slow_work", {})), "Started.", call_tools(("held_work", {})), "Reported.")
    config = ToolConfig(name="held", description="x", version="1")
    tools = [*slow_tools(done, background=True), *langchain_tools(Held(gate=held, entered=entered), config=config)]
    app = runtime(model, tools)
    session = app.session(user_id="u")
    await session.run("start")
    done.set()
    await entered.wait()  # the follow-up turn is half way through

    opening = asyncio.create_task(session.open())
    held.set()
    assert await opening is False, "a running follow-up is not a turn a stopped process left"
    resumed = await session.resume()
    assert resumed.answer == "" and resumed.iterations == 0, "nothing to finish, nothing reported again"
    await app.jobs.drain()
