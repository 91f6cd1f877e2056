"""Issue 30: with plans approved (ORCHESTRATOR_APPROVE_PLANS), the whole plan is asked about before
anything of it runs; a sensitive task inside a plan still asks, as any call does."""

from __future__ import annotations

import json

from langchain_core.messages import BaseMessage
from langchain_core.tools import tool

from orchestrator.folders.sensitivity import WHY_PLANNING
from orchestrator.plans import PLAN_TOOL
from tests.helpers import make_session
from tests.planning.test_plan_runs import Steps, plan_answer, plan_call, task

PLAN = plan_call(task("t1", "step", name="one"), task("t2", "step", ("t1",), name="two"), goal="two steps")


def answer_from_plan(messages: list[BaseMessage]) -> str:
    answer = plan_answer(messages)
    return f"{answer['status']}: {answer['message']}"


async def test_a_plan_waits_for_approval_and_runs_once_approved(scripted):
    steps = Steps()
    session = make_session(scripted(PLAN, answer_from_plan), [steps.tool], approve_plans=True)

    paused = await session.run("two steps please")

    [question] = paused.questions
    assert question.question["kind"] == "approval"
    assert question.question["action"]["name"] == PLAN_TOOL
    assert question.question["action"]["args"]["goal"] == "two steps"
    assert [t["id"] for t in question.question["action"]["args"]["tasks"]] == ["t1", "t2"]
    assert question.question["why"] == WHY_PLANNING
    assert steps.runs == {}, "nothing runs before the plan is approved"

    result = await session.answer({question.id: {"type": "approve"}})

    assert result.answer.startswith("success: Every task of the plan is done")
    assert steps.runs == {"one": 1, "two": 1}


async def test_an_edited_plan_runs_as_the_person_wrote_it_and_the_model_hears_so(scripted):
    steps = Steps()
    session = make_session(scripted(PLAN, answer_from_plan), [steps.tool], approve_plans=True)
    [question] = (await session.run("two steps please")).questions
    edited = {"goal": "two steps", "tasks": [task("t1", "step", name="mine")]}

    result = await session.answer(
        {question.id: {"type": "edit", "edited_action": {"name": PLAN_TOOL, "args": edited}}}
    )

    assert steps.runs == {"mine": 1}
    assert result.answer.startswith(
        "success: The user changed your plan before it ran: the tasks below are theirs."
    )
    assert result.plan is not None and [t["id"] for t in result.plan["tasks"]] == ["t1"]


async def test_an_edited_plan_that_is_not_valid_is_asked_again(scripted):
    steps = Steps()
    session = make_session(scripted(PLAN, answer_from_plan), [steps.tool], approve_plans=True)
    [question] = (await session.run("two steps please")).questions
    bad = {"goal": "two steps", "tasks": [task("t1", "nowhere")]}

    again = await session.answer(
        {question.id: {"type": "edit", "edited_action": {"name": PLAN_TOOL, "args": bad}}}
    )

    [asked] = again.questions
    assert "there is no tool named 'nowhere'" in asked.question["problem"]
    assert steps.runs == {}
    await session.answer({asked.id: {"type": "approve"}})
    assert steps.runs == {"one": 1, "two": 1}


async def test_a_rejected_plan_runs_nothing_and_the_model_hears_why(scripted):
    steps = Steps()
    session = make_session(scripted(PLAN, answer_from_plan), [steps.tool], approve_plans=True)
    [question] = (await session.run("two steps please")).questions

    result = await session.answer({question.id: {"type": "reject", "message": "not today"}})

    assert result.answer == "failure: The user rejected this call: not today"
    assert steps.runs == {} and result.plan is None


async def test_a_sensitive_task_inside_a_plan_still_asks(scripted):
    steps = Steps()
    deleted: list[str] = []

    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    model = scripted(
        plan_call(task("t1", "step", name="one"), task("t2", "files_delete", path="a.txt")),
        answer_from_plan,
    )
    session = make_session(model, [steps.tool, files_delete])

    paused = await session.run("clean up")

    [question] = paused.questions
    assert question.question["action"] == {
        "name": "files_delete", "args": {"path": "a.txt"}, "description": "Delete a file.",
    }
    assert steps.runs == {"one": 1} and deleted == []
    assert paused.plan is not None
    # t1 ended in the same round as t2 asked: its outcome is kept, t2 waits.
    assert [(t["id"], t["status"]) for t in paused.plan["tasks"]] == [("t1", "done"), ("t2", "running")]

    result = await session.answer({question.id: {"type": "approve"}})

    assert deleted == ["a.txt"] and steps.runs == {"one": 1}, "the finished task did not run again"
    assert result.answer.startswith("success: Every task of the plan is done")


async def test_a_sensitive_task_rejected_inside_a_plan_fails_it(scripted):
    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    def told(messages: list[BaseMessage]) -> str:
        answer = plan_answer(messages)
        assert "Task t1 (files_delete) failed: The user rejected this call: keep it" in answer["message"]
        return "I kept the file."

    model = scripted(plan_call(task("t1", "files_delete", path="a.txt")), told)
    session = make_session(model, [files_delete])
    [question] = (await session.run("clean up")).questions

    result = await session.answer({question.id: {"type": "reject", "message": "keep it"}})

    assert result.answer == "I kept the file."
    assert json.dumps(result.plan["tasks"][0]["status"]) == '"failed"'  # type: ignore[index]
