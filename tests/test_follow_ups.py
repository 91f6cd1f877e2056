"""Follow-up turns of background tasks are bounded: a task that starts another cannot chain forever."""

from __future__ import annotations

import asyncio

from langchain_core.messages import SystemMessage

from orchestrator.graph.prompts import FOLLOW_UP_LIMIT
from orchestrator.testing import call_tools
from tests.test_background import runtime, slow_tools


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
    await app.tasks.drain()

    assert reports == ["Started again.", "And again.", None], "the third result got no turn"
    history = await session.history()
    assert isinstance(history[-1], SystemMessage) and history[-1].text == FOLLOW_UP_LIMIT
    assert "slow work done" in history[-2].text, "the result is kept in the conversation"
    assert not (await app.graph.aget_state(session.config)).next, "the turn is closed"

    answer = await session.run("anything new?")
    assert answer.answer == "The third one is done too."
