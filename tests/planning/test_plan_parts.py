"""Issue 30, the parts of planning on their own: references, the plan's checks, the state's reducer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field, SkipValidation

from orchestrator.errors import UnresolvedReferenceError
from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.graph.planning.lifecycle import ended, made_plan, merge_plan, ready
from orchestrator.graph.planning.references import referenced_tasks, resolve
from orchestrator.graph.planning.validation import PlanRules, TaskSpec, argument_problems
from orchestrator.levels import Limits, Planning
from orchestrator.plans import Plan, PlanTask, TaskOutcome, plan_view
from orchestrator.tools.results import ToolResult

RESULTS = {
    "t1": {"status": "success", "message": "found", "data": {"city": "Paris", "temp": 21, "items": [{"n": 1}]}},
    "t2": {"status": "success", "message": "42"},
}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("{{t1.data.city}}", "Paris"),
        ("{{ t1.data.temp }}", 21),  # alone: the value as it is
        ("{{t1.data.items.0.n}}", 1),
        ("{{t1.data}}", RESULTS["t1"]["data"]),
        ("It is {{t1.data.temp}} in {{t1.data.city}}", "It is 21 in Paris"),
        ("{{t1.data.items}} and {{t2.message}}", '[{"n": 1}] and 42'),
        ({"deep": ["{{t2.message}}", 3]}, {"deep": ["42", 3]}),
        ("no reference", "no reference"),
    ],
)
def test_references_take_values_from_earlier_results(given: object, expected: object):
    assert resolve(given, RESULTS) == expected


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("{{t1.data.country}}", "{{t1.data.country}}: t1's result has no 'country' there (it has 'city', 'temp', 'items')"),
        ("{{t1.data.items.5}}", "{{t1.data.items.5}}: t1's result has no '5' there (a list of 1)"),
        ("{{t3.data}}", "t3 has no result to take {{t3.data}} from"),
    ],
)
def test_a_reference_without_a_value_is_an_error_naming_it(given: str, problem: str):
    with pytest.raises(UnresolvedReferenceError) as raised:
        resolve(given, {**RESULTS, "t3": None})
    assert str(raised.value) == problem


def test_referenced_tasks_are_found_at_any_depth():
    arguments = {"a": "{{t1.data}}", "b": [{"c": "x {{t2.message}} y {{t1.data.city}}"}], "n": 3}
    assert list(referenced_tasks(arguments)) == ["t1", "t2", "t1"]


class Scoped(BaseModel):
    query: str = Field(min_length=1)
    limit: int = 5
    api_key: str


class _Scope:
    hidden = frozenset({"api_key"})
    fixed = {"api_key": "secret"}


class ScopedTool(StructuredTool):
    """A tool with a scope, as a folder's `parameters:` give one (see `folders.scope`)."""

    scope: SkipValidation[object] = None


async def _search(query: str, limit: int = 5, api_key: str = "") -> str:
    return query


search = ScopedTool(
    name="search", description="Search.", args_schema=Scoped, coroutine=_search, scope=_Scope()
)


def test_a_task_may_not_set_a_fixed_parameter_and_is_checked_with_the_fixed_values():
    assert argument_problems(search, {"query": "x"}) == []
    assert argument_problems(search, {"query": "x", "api_key": "mine"}) == [
        "search does not take 'api_key' from the model: it is fixed by the tool's configuration. "
        "Call it again without it."
    ]
    assert argument_problems(search, {"query": ""}) == ["query: String should have at least 1 character"]


def test_arguments_holding_a_reference_are_checked_once_it_is_resolved():
    assert argument_problems(search, {"query": "{{t1.data.city}}", "limit": "{{t1.data.temp}}"}) == []
    assert argument_problems(search, {"query": "{{t1.data.city}}", "limit": "many"}) == [
        "limit: Input should be a valid integer, unable to parse string as an integer"
    ]


def spec(task_id: str, *depends_on: str, **arguments: object) -> TaskSpec:
    return TaskSpec(id=task_id, description="d", tool="search", arguments=arguments or {"query": "q"},
                    depends_on=list(depends_on))


def pending(task_id: str, *depends_on: str, status: str = "pending") -> PlanTask:
    return PlanTask(id=task_id, description="d", tool="search", arguments={}, depends_on=list(depends_on),
                    status=status, request_id=None, result=None)  # type: ignore[typeddict-item]


def test_a_re_plan_may_depend_on_and_refer_to_the_tasks_it_keeps_and_counts_them():
    rules = PlanRules({"search": search}, max_tasks=3, kept=(pending("t1", status="done"),))
    assert rules.problems([spec("t2", "t1", query="{{t1.data.city}}")]) == []
    assert rules.problems([spec("t1")]) == [
        "every task given is done already: list only the tasks still to do, or answer"
    ]
    assert rules.problems([spec("t1"), spec("t2"), spec("t3"), spec("t4")]) == [
        "4 tasks, and a plan may have 3 (ORCHESTRATOR_MAX_PLAN_TASKS): merge or drop some"
    ]


def test_a_cycle_through_several_tasks_is_named_with_what_waits_on_it():
    rules = PlanRules({"search": search}, max_tasks=10)
    problems = rules.problems([spec("a", "c"), spec("b", "a"), spec("c", "b"), spec("d"), spec("e", "a")])
    assert problems == ["tasks a, b, c, e depend on each other in a cycle: nothing of it could ever run"]


def plan_of(*tasks: PlanTask) -> Plan:
    return Plan(id="p", goal="g", tasks=list(tasks), status="running", replans=0, replaced=[],
                request_id="r", call_id="c", turn="m1", under=None, note="")


def test_outcomes_of_tasks_ending_together_each_change_their_own_task():
    plan = plan_of(pending("t1"), pending("t2"), pending("t3", "t1", "t2"))
    assert [t["id"] for t in ready(plan)] == ["t1", "t2"]
    for task_id in ("t2", "t1"):
        plan = merge_plan(plan, TaskOutcome(task=task_id, status="done", request_id=f"r-{task_id}",
                                            result={"status": "success"}))  # type: ignore[assignment]
    assert [(t["id"], t["status"], t["request_id"]) for t in plan["tasks"]] == [
        ("t1", "done", "r-t1"), ("t2", "done", "r-t2"), ("t3", "pending", None),
    ]
    assert [t["id"] for t in ready(plan)] == ["t3"]
    assert merge_plan(plan, None) is None
    assert plan_view(ended(plan, "cancelled"))["tasks"][2]["status"] == "failed", "it was running"
    assert plan_view(ended(plan, "failed"))["tasks"][2]["status"] == "skipped"


def test_a_re_plan_keeps_the_done_tasks_and_sets_the_others_aside():
    failed = {**plan_of(pending("t1", status="done"), pending("t2", status="failed"),
                        pending("t3", "t2", status="skipped")), "status": "failed"}
    data = {"goal": "again", "tasks": [{"id": "t2", "description": "d", "tool": "search",
                                          "arguments": {"query": "{{t1.data}}"}, "depends_on": ["t1"]}]}
    result = ToolResult(message="accepted", data=data, request_id="r2")

    revised = made_plan(result, call_id="c2", revising=failed, turn="m1", under=None)  # type: ignore[arg-type]

    assert revised is not None
    assert (revised["id"], revised["request_id"], revised["call_id"], revised["replans"]) == ("p", "r2", "c2", 1)
    assert [(t["id"], t["status"]) for t in revised["tasks"]] == [("t1", "done"), ("t2", "pending")]
    assert [(t["id"], t["status"]) for t in revised["replaced"]] == [("t2", "failed"), ("t3", "skipped")]


PLANNING_SNAPSHOT = Path(__file__).resolve().parents[1] / "snapshots" / "planning_graph.mmd"


def test_a_planning_graph_has_the_plan_executor_after_the_model(scripted):
    spec = AgentSpec(
        model=scripted(), tools=[search],
        limits=Limits(max_iterations=5, max_result_chars=4000, timeout_seconds=60.0),
        planning=Planning(),
    )
    drawing = build_agent_graph(spec, checkpointer=InMemorySaver()).get_graph().draw_mermaid()
    if os.environ.get("UPDATE_SNAPSHOTS"):
        PLANNING_SNAPSHOT.write_text(drawing)
    assert drawing == PLANNING_SNAPSHOT.read_text(), "graph changed: rerun with UPDATE_SNAPSHOTS=1, review"
