"""Judged closure (issue 46, item 5): a model judges an agent's answer before its request
closes, and sends it back for at most `max_rounds` more rounds, each verdict in the request log."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.graph.closure import JUDGE_NOTE, JUDGE_PROMPT
from orchestrator.levels import Closure, Limits
from orchestrator.notes import NOTE_KEY
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.tools.context import RunContext
from tests.helpers import dispatcher, logged_context
from tests.tool_folders import approve_all, parrot_agent

LIMITS = Limits(max_iterations=5, max_result_chars=4000, timeout_seconds=60.0)


def is_judge(messages: list[BaseMessage]) -> bool:
    return messages[0].text == JUDGE_PROMPT


def sent_back(messages: list[BaseMessage]) -> int:
    return sum(m.additional_kwargs.get(NOTE_KEY) == JUDGE_NOTE for m in messages)


async def answered(model: ScriptedChatModel, closure: Closure | None) -> list[BaseMessage]:
    graph = build_agent_graph(AgentSpec(model=model, tools=[], limits=LIMITS, closure=closure))
    state = await graph.ainvoke({"messages": [HumanMessage("count to three")]}, context=RunContext(user_id="u"))
    return state["messages"]


async def test_the_judge_sends_the_answer_back_at_most_max_rounds_times():
    judged: list[str] = []

    def step(messages: list[BaseMessage]) -> str:
        if is_judge(messages):
            judged.append(messages[1].text)
            return 'Verdict: {"fulfilled": false, "reason": "It stopped before three."}'
        return f"Answer {sent_back(messages) + 1}."

    messages = await answered(ScriptedChatModel(steps=[step] * 5), Closure(max_rounds=2))

    assert [m.text for m in messages if m.type == "ai"] == ["Answer 1.", "Answer 2.", "Answer 3."]
    assert len(judged) == 2, "the last answer, out of rounds, is not judged"
    assert "Request:\ncount to three" in judged[0] and "Final answer:\nAnswer 1." in judged[0]
    notes = [m.text for m in messages if m.additional_kwargs.get(NOTE_KEY) == JUDGE_NOTE]
    assert len(notes) == 2 and all("It stopped before three." in n for n in notes)


async def test_a_fulfilled_or_unreadable_verdict_and_no_closure_leave_the_answer_as_it_is():
    for verdict in ('{"fulfilled": true, "reason": "Done."}', "I think so?"):
        steps = ["One, two, three.", verdict]
        messages = await answered(ScriptedChatModel(steps=steps), Closure())
        assert [m.text for m in messages if m.type == "ai"] == ["One, two, three."]
    unjudged = ScriptedChatModel(steps=["One, two, three."])
    assert [m.text for m in await answered(unjudged, None) if m.type == "ai"] == ["One, two, three."]


def parrot_step(messages: list[BaseMessage]) -> object:
    """The parrot says polly, is judged short of the request once, says it again."""
    if is_judge(messages):
        return json.dumps({"fulfilled": False, "reason": "It was asked to say polly twice."})
    if "You are parrot" not in messages[0].text:
        return "The orchestrator's own turn."
    if isinstance(messages[-1], ToolMessage):
        return "Said polly twice." if sent_back(messages) else "Said polly."
    return call_tools(("echo_say", {"text": "polly"}))


async def test_an_agent_folders_closure_is_judged_and_each_verdict_is_in_the_request_log(
    database: Database, tmp_path: Path
):
    parrot_agent(tmp_path / "sub_graphs", closure={"judge": True, "max_rounds": 1})
    settings = load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")
    approve_all(settings)
    runtime = Orchestrator.create(
        settings, model=ScriptedChatModel(steps=[parrot_step] * 8), checkpointer=InMemorySaver()
    )
    pipeline = dispatcher(runtime.tools)
    call = {"name": "parrot_ask", "args": {"request": "say polly twice"}, "id": "c1", "type": "tool_call"}
    request = pipeline.request(call, logged_context(database, "closure-session"))
    result = await pipeline.dispatch(request)

    assert (result.status, result.message) == ("success", "Said polly twice.")
    history = await request_history(database, request.record.request_id, user_id="u1")
    judged = [json.loads(detail or "{}") for status, detail in history if status == "judged"]
    assert judged == [{"fulfilled": False, "reason": "It was asked to say polly twice.", "round": 1}]


async def test_the_settings_judge_the_orchestrators_own_answers(tmp_path: Path):
    def step(messages: list[BaseMessage]) -> str:
        if is_judge(messages):
            return '{"fulfilled": false, "reason": "Say three too."}'
        return "One, two, three." if sent_back(messages) else "One, two."

    settings = load_settings(
        sub_graphs_dir=tmp_path / "none", closure_judge=True, closure_max_rounds=1
    )
    runtime = Orchestrator.create(
        settings, model=ScriptedChatModel(steps=[step] * 3), checkpointer=InMemorySaver()
    )
    result = await runtime.session(user_id="u").run("count to three")
    unjudged = Orchestrator.create(
        load_settings(sub_graphs_dir=tmp_path / "none"),
        model=ScriptedChatModel(steps=[step]),
        checkpointer=InMemorySaver(),
    )

    assert result.answer == "One, two, three."
    assert (await unjudged.session(user_id="u").run("count to three")).answer == "One, two."
