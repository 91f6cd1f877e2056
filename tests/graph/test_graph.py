"""The model -> router -> tools loop, driven by the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ToolError
from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.levels import Limits
from orchestrator.testing import call_tools
from orchestrator.tools.context import current_context
from orchestrator.tools.results import ToolResult
from tests.helpers import EventLog, make_session, tool_json

SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "agent_graph.mmd"


def limits(*, max_iterations: int, max_result_chars: int) -> Limits:
    return Limits(
        max_iterations=max_iterations, max_result_chars=max_result_chars, timeout_seconds=60.0
    )


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


def tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


async def test_tool_result_reaches_the_model_and_its_answer(scripted):
    def answer_from_result(messages: list[BaseMessage]) -> str:
        result = json.loads(messages[-1].text)
        return f"The sum is {result['data']}."

    model = scripted(call_tools(("add", {"a": 2, "b": 3})), answer_from_result)
    session = make_session(model, [add])

    result = await session.run("What is 2 + 3?")

    assert result.answer == "The sum is 5."
    assert result.iterations == 2
    assert [(c.name, c.arguments, c.status) for c in result.tool_calls] == [
        ("add", {"a": 2, "b": 3}, "success")
    ]
    second_call = model.received[1]
    request, outcome = second_call[-2], second_call[-1]
    assert isinstance(request, AIMessage) and request.tool_calls[0]["name"] == "add"
    assert isinstance(outcome, ToolMessage)
    assert outcome.tool_call_id == request.tool_calls[0]["id"]
    assert tool_json(outcome.text) == {"status": "success", "data": 5}


async def test_a_level_without_tool_data_gives_the_model_the_message_alone(scripted):
    @tool
    async def lookup() -> ToolResult:
        """Look a customer up."""
        return ToolResult(message="Found Ada.", data={"card": "4111-1111"})

    model = scripted(call_tools(("lookup", {})), "done")
    await make_session(model, [lookup], include_tool_data=False).run("find her")
    shown = model.received[1][-1].text
    with_data = scripted(call_tools(("lookup", {})), "done")
    await make_session(with_data, [lookup]).run("find her")

    assert tool_json(shown) == {"status": "success", "message": "Found Ada."}
    assert json.loads(with_data.received[1][-1].text)["data"] == {"card": "4111-1111"}


async def test_iteration_limit_ends_the_turn_with_a_message(scripted):
    model = scripted(*[call_tools(("add", {"a": 1, "b": i})) for i in range(3)])
    session = make_session(model, [add], max_tool_iterations=2)

    result = await session.run("keep adding")

    assert "stopped after 2 rounds of tool calls" in result.answer
    assert result.iterations == 3
    history = await session.history()
    assert not history[-1].tool_calls, "the last message must not leave calls unanswered"
    assert len(tool_messages(history)) == 2


async def test_limit_is_per_turn_not_per_session(scripted):
    model = scripted(
        call_tools(("add", {"a": 1, "b": 1})),
        "two",
        call_tools(("add", {"a": 2, "b": 2})),
        "four",
    )
    session = make_session(model, [add], max_tool_iterations=1)

    assert (await session.run("1+1")).answer == "two"
    assert (await session.run("2+2")).answer == "four"


async def test_large_results_are_truncated_with_a_note(scripted):
    @tool
    async def dump() -> str:
        """Return a lot of text."""
        return "x" * 10_000

    session = make_session(scripted(call_tools(("dump", {})), "ok"), [dump], max_tool_result_chars=500)

    await session.run("dump it")

    [message] = tool_messages(await session.history())
    body, note = message.text.split("\n", 1)
    assert len(body) == 500
    stamp = {"timestamp": "2026-01-01T00:00:00Z"}  # a timestamp is always this long
    full = {"status": "success", "metadata": stamp, "message": "x" * 10_000}
    full_length = len(json.dumps(full))
    assert body.startswith('{"status": "success", "metadata": {"timestamp": "')
    assert "truncated" in note and f"{full_length} characters" in note and "500" in note


async def test_raising_tool_becomes_an_error_message_and_the_loop_goes_on(scripted):
    model = scripted(call_tools(("explode", {"reason": "test"})), "It failed, sorry.")
    session = make_session(model, [explode])

    result = await session.run("try it")

    assert result.answer == "It failed, sorry."
    assert result.tool_calls[0].status == "failure"
    [message] = tool_messages(model.received[1])
    assert message.status == "error"
    body = json.loads(message.text)
    assert body["status"] == "failure"
    assert body["error_code"] == "tool_failed"
    assert "RuntimeError: boom: test" in body["message"]


async def test_tool_error_keeps_its_code_and_recoverability(scripted):
    @tool
    async def quota() -> str:
        """Fails with a chosen code."""
        raise ToolError("quota exhausted", code="quota", recoverable=False)

    model = scripted(call_tools(("quota", {})), "done")
    await make_session(model, [quota]).run("go")

    body = tool_json(tool_messages(model.received[1])[0].text)
    assert body == {
        "type": "error",
        "status": "failure",
        "message": "quota exhausted",
        "error_code": "quota",
        "recoverable": False,
    }


async def test_unknown_tool_is_reported_to_the_model(scripted):
    model = scripted(call_tools(("teleport", {"to": "mars"})), "I cannot do that.")
    result = await make_session(model, [add]).run("go to mars")

    assert result.answer == "I cannot do that."
    body = json.loads(tool_messages(model.received[1])[0].text)
    assert body["error_code"] == "unknown_tool"
    assert "teleport" in body["message"] and "add" in body["message"]


async def test_bad_arguments_are_reported_to_the_model(scripted):
    model = scripted(call_tools(("add", {"a": "two"})), "Let me fix that.")
    result = await make_session(model, [add]).run("add")

    assert result.tool_calls[0].status == "failure"
    body = json.loads(tool_messages(model.received[1])[0].text)
    assert body["error_code"] == "invalid_arguments"
    assert "a: Input should be a valid integer" in body["message"]
    assert "b: Field required" in body["message"]


async def test_tool_calls_of_one_turn_run_concurrently(scripted):
    # Each call waits at a barrier that only opens once all three are inside:
    # run one after another, the first would time out and fail.
    barrier = asyncio.Barrier(3)

    @tool
    async def meet(name: str) -> str:
        """Wait for the others."""
        await asyncio.wait_for(barrier.wait(), timeout=120)  # a bound only: one after another, never
        return name

    calls = call_tools(*[("meet", {"name": n}) for n in "abc"])
    events = EventLog()
    result = await make_session(scripted(calls, "met"), [meet]).run("meet", on_event=events)

    assert [c.status for c in result.tool_calls] == ["success"] * 3
    phases = [phase for _, _, phase in events.tool_phases()]
    assert phases.index("completed") > max(i for i, p in enumerate(phases) if p == "executing")


async def test_events_report_stages_and_tool_progress(scripted):
    events = EventLog()
    model = scripted(call_tools(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})), "3 and 7")

    await make_session(model, [add]).run("sums", on_event=events)

    assert events.stages() == [
        "submitted", "streaming", "executing", "processing", "streaming", "complete"
    ]
    assert sorted(events.tool_phases()) == sorted(
        [
            ("add", i, phase)
            for i in (1, 2)
            for phase in ("starting", "validating", "executing", "completed")
        ]
    )
    assert all(e["total"] == 2 for e in events if e["kind"] == "tool")


async def test_model_failure_reports_the_error_stage(scripted):
    def fail(messages: list[BaseMessage]) -> str:
        raise ConnectionError("model down")

    events = EventLog()
    session = make_session(scripted(fail), [])
    try:
        await session.run("hi", on_event=events)
    except ConnectionError:
        pass
    else:
        raise AssertionError("the model's failure must reach the caller")
    assert events.stages()[-1] == "error"


async def test_memory_spans_turns_of_a_session(scripted):
    model = scripted("Nice to meet you, Ada.", "Your name is Ada.")
    session = make_session(model, [])

    await session.run("My name is Ada.")
    await session.run("What is my name?")

    texts = [m.text for m in model.received[1]]
    assert "My name is Ada." in texts and "Nice to meet you, Ada." in texts


async def test_nested_agent_calls_carry_the_parent_request_id(scripted):
    seen: dict[str, str | None] = {}

    @tool
    async def leaf() -> str:
        """The inner agent's tool."""
        seen["leaf_id"] = current_context().request_id
        return "leaf done"

    inner = build_agent_graph(
        AgentSpec(
            model=scripted(call_tools(("leaf", {})), "inner done"),
            tools=[leaf],
            limits=limits(max_iterations=3, max_result_chars=1000),
            name="inner",
        )
    )

    @tool
    async def delegate(request: str, config: RunnableConfig) -> str:
        """Hand the request to the inner agent."""
        context = current_context()
        seen["delegate_id"] = context.request_id
        state = await inner.ainvoke(
            {"messages": [("user", request)]}, config, context=context
        )
        answer = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        seen["leaf_parent"] = answer.artifact["parent_request_id"]
        assert answer.artifact["request_id"] == seen["leaf_id"]
        return state["messages"][-1].text

    outer = scripted(call_tools(("delegate", {"request": "do it"})), "all done")
    result = await make_session(outer, [delegate]).run("go")

    assert result.answer == "all done"
    assert seen["leaf_parent"] == seen["delegate_id"] == result.tool_calls[0].request_id


def test_graph_shape_matches_snapshot(scripted):
    graph = build_agent_graph(
        AgentSpec(
            model=scripted(), tools=[add], limits=limits(max_iterations=5, max_result_chars=4000)
        ),
        checkpointer=InMemorySaver(),
    )
    drawing = graph.get_graph().draw_mermaid()
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(drawing)
    assert drawing == SNAPSHOT.read_text(), "graph changed: rerun with UPDATE_SNAPSHOTS=1, review"


def test_a_turns_model_calls_are_counted_from_its_first_message():
    """The user's message or a follow-up notice begins a turn; tool results are not model calls."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from orchestrator.graph.state import model_calls_this_turn

    call = AIMessage("", tool_calls=[{"name": "add", "args": {}, "id": "c1"}])
    done = ToolMessage("5", tool_call_id="c1")
    earlier = [HumanMessage("1+1"), call, done, AIMessage("two")]

    assert model_calls_this_turn([]) == 0
    assert model_calls_this_turn([*earlier, HumanMessage("again")]) == 0
    assert model_calls_this_turn([*earlier, HumanMessage("again"), call, done]) == 1
    assert model_calls_this_turn([*earlier, SystemMessage("task t1 ended"), call, done, call]) == 2
