"""Issue 30: the model lays out a plan; its tasks run (at once where they can), each through the
dispatch pipeline, and the model answers from their results, or re-plans after a failure."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from orchestrator.errors import ToolError
from orchestrator.plans import PLAN_TOOL
from orchestrator.testing import call_tools
from tests.helpers import EventLog, make_session

# A bound for the gates below: a plan that never opens them fails instead of hanging.
GATE_SECONDS = 120  # an upper bound only: the tasks start at once when they run side by side


def plan_call(*tasks: dict[str, object], goal: str = "the goal") -> AIMessage:
    return call_tools((PLAN_TOOL, {"goal": goal, "tasks": list(tasks)}))


def task(task_id: str, tool_name: str, depends_on: tuple[str, ...] = (), **arguments: object) -> dict[str, object]:
    return {
        "id": task_id, "description": f"do {task_id}", "tool": tool_name, "arguments": arguments,
        "depends_on": list(depends_on),
    }


def plan_answer(messages: list[BaseMessage]) -> dict[str, object]:
    """The answer to the model's plan call: the last message it got."""
    last = messages[-1]
    assert isinstance(last, ToolMessage) and last.name == PLAN_TOOL, last
    return json.loads(last.text)


class Steps:
    """A tool `step(name)` that counts its runs, and fails for the names in `failing`."""

    def __init__(self, *failing: str) -> None:
        self.runs: Counter[str] = Counter()
        self.failing = set(failing)

        @tool
        async def step(name: str) -> str:
            """Do one named step."""
            self.runs[name] += 1
            if name in self.failing:
                raise ToolError(f"{name} broke", recoverable=False)
            return f"{name} ok"

        self.tool = step


async def test_independent_tasks_run_at_once_and_a_dependent_one_after_with_their_results(scripted):
    started: list[str] = []
    finished: list[str] = []
    all_started = asyncio.Event()
    seen_by_compare: list[list[str]] = []

    @tool
    async def weather(city: str) -> dict[str, object]:
        """The weather of a city."""
        started.append(city)
        if len(started) == 3:
            all_started.set()
        # Each waits until all three have started: run one after another, they never would.
        await asyncio.wait_for(all_started.wait(), GATE_SECONDS)
        finished.append(city)
        return {"city": city, "temp": len(city)}

    @tool
    async def compare(first: int, second: int, label: str) -> str:
        """Compare two temperatures."""
        seen_by_compare.append(list(finished))
        return f"{label}: {first} vs {second}"

    model = scripted(
        plan_call(
            task("t1", "weather", city="Paris"),
            task("t2", "weather", city="Rome"),
            task("t3", "weather", city="Oslo"),
            task(
                "t4", "compare", ("t1", "t3"),
                first="{{t1.data.temp}}", second="{{t3.data.temp}}", label="{{t1.data.city}} and Oslo",
            ),
        ),
        lambda messages: f"Answer from {len(plan_answer(messages)['data']['tasks'])} results.",
    )
    session = make_session(model, [weather, compare])
    events = EventLog()

    result = await session.run("compare the weather", on_event=events)

    assert result.answer == "Answer from 4 results."
    assert sorted(started) == ["Oslo", "Paris", "Rome"]
    assert seen_by_compare == [finished] and sorted(finished) == ["Oslo", "Paris", "Rome"], (
        "the dependent task ran once, after the tasks it depends on had finished"
    )
    answer = plan_answer(model.received[-1])
    assert answer["status"] == "success" and "Every task of the plan is done" in answer["message"]
    by_id = {t["id"]: t for t in answer["data"]["tasks"]}
    assert by_id["t4"]["result"]["message"] == "Paris and Oslo: 5 vs 4", "numbers stay numbers"
    assert result.plan is not None
    assert [(t["id"], t["tool"], t["status"]) for t in result.plan["tasks"]] == [
        ("t1", "weather", "done"), ("t2", "weather", "done"), ("t3", "weather", "done"),
        ("t4", "compare", "done"),
    ]
    assert len({t["request_id"] for t in result.plan["tasks"]}) == 4
    changes = [(e["task"], e["status"]) for e in events if e["kind"] == "plan" and e["task"]]
    assert changes.index(("t4", "running")) > max(changes.index((t, "done")) for t in ("t1", "t3"))
    assert [c.name for c in result.tool_calls] == [PLAN_TOOL], "the model's own calls"


async def test_a_failed_task_is_re_planned_keeping_the_finished_ones(scripted):
    steps = Steps("broken")

    def re_plan(messages: list[BaseMessage]) -> AIMessage:
        answer = plan_answer(messages)
        assert answer["status"] == "failure" and answer["error_code"] == "task_failed"
        assert "Task t2 (step) failed: broken broke" in answer["message"]
        assert "Done, and kept: t1" in answer["message"] and "Not run: t3" in answer["message"]
        assert "Re-plans left: 2" in answer["message"]
        return plan_call(task("t2", "step", name="mended"), task("t3", "step", ("t1", "t2"), name="last"))

    model = scripted(
        plan_call(task("t1", "step", name="first"), task("t2", "step", name="broken"),
                  task("t3", "step", ("t2",), name="last")),
        re_plan,
        "All done.",
    )
    session = make_session(model, [steps.tool])

    result = await session.run("do the steps")

    assert result.answer == "All done."
    assert steps.runs == {"first": 1, "broken": 1, "mended": 1, "last": 1}, "t1 was kept, not run again"
    plan = result.plan
    assert plan is not None and plan["replans"] == 1 and plan["status"] == "done"
    assert [(t["id"], t["status"]) for t in plan["tasks"]] == [("t1", "done"), ("t2", "done"), ("t3", "done")]
    assert [(t["id"], t["status"]) for t in plan["replaced"]] == [("t2", "failed"), ("t3", "skipped")]
    history = await session.history()
    plan_calls = [m for m in history if isinstance(m, AIMessage) and m.tool_calls]
    answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
    assert len(plan_calls) == 2 and all(c.tool_calls[0]["id"] in answered for c in plan_calls)


async def test_past_the_re_plan_limit_the_turn_ends_with_what_was_and_was_not_done(scripted):
    steps = Steps("broken", "still_broken")
    model = scripted(
        plan_call(task("t1", "step", name="first"), task("t2", "step", name="broken"),
                  task("t3", "step", ("t2",), name="last")),
        lambda messages: plan_call(task("t2", "step", name="still_broken"), task("t3", "step", ("t2",), name="last")),
    )
    session = make_session(model, [steps.tool], max_replans=1)

    result = await session.run("do the steps")

    assert result.answer.startswith("I stopped: a task of the plan failed, and 1 re-plan(s) is the limit")
    assert "Done: t1 (do t1)." in result.answer
    assert "Not done: t2 (do t2): failed: still_broken broke; t3 (do t3): not run." in result.answer
    assert steps.runs == {"first": 1, "broken": 1, "still_broken": 1}
    assert result.plan is not None and result.plan["status"] == "stopped"
    history = await session.history()
    assert isinstance(history[-1], AIMessage) and not history[-1].tool_calls
    last_answer = json.loads(history[-2].text)
    assert "The re-plan limit (1, ORCHESTRATOR_MAX_REPLANS) is reached" in last_answer["message"]
    # The next turn is the model's again, with a valid history.
    model.steps.append("Fine.")
    assert (await session.run("ok")).answer == "Fine."


@pytest.mark.parametrize(
    ("tasks", "problem"),
    [
        ([task("t1", "nope")], "task t1: there is no tool named 'nope' (the tools: step)"),
        ([task("t1", "step", ("t2",), name="a"), task("t2", "step", ("t1",), name="b")],
         "tasks t1, t2 depend on each other in a cycle"),
        ([task("t1", "step", name=5)], "task t1: name: Input should be a valid string"),
        ([task("t1", "step", name="a", color="red")], "task t1: step does not take 'color' (it takes name)"),
        ([task("t1", "step", ("t9",), name="a")], "task t1 depends on 't9', which is no task of the plan"),
        ([task("t1", "step", name="{{t7.data}}")], "task t1 refers to 't7', which is no task of the plan"),
        ([task("t1", "step", name="a"), task("t1", "step", name="b")], "the id 't1' is given to more than one task"),
        ([task("t1", "step", ("t1",), name="a")], "task t1 depends on itself"),
        ([task("t1", PLAN_TOOL)], "task t1: a plan's task cannot make a plan"),
        ([task(f"t{i}", "step", name="a") for i in range(3)], "3 tasks, and a plan may have 2"),
    ],
)
async def test_an_invalid_plan_goes_back_to_the_model_naming_what_is_wrong(scripted, tasks, problem):
    steps = Steps()

    def told(messages: list[BaseMessage]) -> str:
        answer = plan_answer(messages)
        assert answer["status"] == "failure" and answer["error_code"] == "invalid_arguments"
        assert problem in answer["message"], answer["message"]
        return "I could not plan that."

    session = make_session(scripted(plan_call(*tasks), told), [steps.tool], max_plan_tasks=2)

    result = await session.run("plan it")

    assert result.answer == "I could not plan that."
    assert steps.runs == {} and result.plan is None


async def test_a_reference_to_a_value_the_result_lacks_fails_its_task(scripted):
    steps = Steps()

    def failed(messages: list[BaseMessage]) -> str:
        message = plan_answer(messages)["message"]
        assert "Task t2 (step) failed: {{t1.data.missing}}: t1's result has no 'data' there" in message
        return "It failed."

    model = scripted(
        plan_call(task("t1", "step", name="a"), task("t2", "step", name="{{t1.data.missing}}")),
        failed,
    )
    session = make_session(model, [steps.tool])

    assert (await session.run("go")).answer == "It failed."
    assert steps.runs == {"a": 1}


async def test_planning_off_offers_no_plan_tool(scripted):
    steps = Steps()
    model = scripted("Hello.")
    session = make_session(model, [steps.tool], planning=False)

    await session.run("hi")

    assert model.bound_tools == ["step"]
    on = scripted("Hello.")
    await make_session(on, [steps.tool]).run("hi")
    assert on.bound_tools == ["step", PLAN_TOOL]
