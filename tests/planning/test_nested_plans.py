"""Issue 30: nested agents plan too; their plans show under the task (or call) of the level above."""

from __future__ import annotations

from pathlib import Path

from orchestrator.runtime import Orchestrator
from orchestrator.testing import call_tools
from tests.folders.test_yaml_agent import approve_all, settings_for, yaml_agent
from tests.helpers import EventLog
from tests.planning.test_plan_runs import plan_answer, plan_call, task
from tests.tool_folders import write_folder


def helper_tree(tmp_path: Path, **fields: object) -> None:
    """An agent `helper` over the tool `echo` (`echo_say`)."""
    root = tmp_path / "sub_graphs"
    yaml_agent(root, "helper", **fields)
    write_folder(root, "helper/src/sub_graphs/echo")


async def test_a_plan_made_by_an_agent_shows_under_the_task_that_called_it(tmp_path: Path, scripted):
    helper_tree(tmp_path)
    model = scripted(
        plan_call(task("t1", "helper_ask", request="say a, then b"), goal="ask the helper"),
        plan_call(task("h1", "echo_say", text="a"), task("h2", "echo_say", ("h1",), text="b"), goal="echo"),
        lambda messages: f"helper: {plan_answer(messages)['message']}",
        "The helper said a and b.",
    )
    runtime = Orchestrator.create(settings_for(tmp_path), model=model, ask=approve_all)
    events = EventLog()

    result = await runtime.session(user_id="u").run("get the helper to say a and b", on_event=events)

    assert result.answer == "The helper said a and b."
    assert result.plan is not None
    [top_task] = result.plan["tasks"]
    nested = top_task["plan"]
    assert nested["goal"] == "echo" and nested["status"] == "done"
    assert [(t["id"], t["tool"], t["status"]) for t in nested["tasks"]] == [
        ("h1", "echo_say", "done"), ("h2", "echo_say", "done"),
    ]
    made = [e for e in events if e["kind"] == "plan" and e["plan"] is not None]
    top, below = made[0], next(e for e in made if e["plan"]["goal"] == "echo")
    assert (top["depth"], top["under"]) == (0, None)
    assert below["depth"] == 1 and below["under"] == top_task["request_id"], (
        "the agent's plan runs for the top plan's task"
    )
    assert result.to_json()["plan"]["tasks"][0]["plan"]["tasks"][1]["id"] == "h2"


async def test_an_agent_called_directly_reports_its_plan_under_its_call(tmp_path: Path, scripted):
    helper_tree(tmp_path)
    model = scripted(
        call_tools(("helper_ask", {"request": "say a"})),
        plan_call(task("h1", "echo_say", text="a"), goal="echo"),
        "said a",
        "Done.",
    )
    runtime = Orchestrator.create(settings_for(tmp_path), model=model, ask=approve_all)

    result = await runtime.session(user_id="u").run("get the helper to say a")

    assert result.plan is None, "the orchestrator itself made no plan"
    [call] = result.tool_calls
    assert call.plan is not None and [t["id"] for t in call.plan["tasks"]] == ["h1"]
    assert result.to_json()["tool_calls"][0]["plan"]["goal"] == "echo"


def test_an_agent_folder_may_turn_planning_off_or_approve_its_plans(tmp_path: Path, scripted):
    helper_tree(tmp_path, planning=False)
    yaml_agent(tmp_path / "sub_graphs", "careful", approve_plans=True)
    runtime = Orchestrator.create(settings_for(tmp_path), model=scripted(), ask=approve_all)

    levels = {loaded.folder.name: loaded.level for loaded in runtime.sub_agents}
    assert levels["helper"].planning is None
    assert levels["careful"].planning is not None and levels["careful"].planning.approve
    graphs = {loaded.folder.name: loaded.tool._graph for loaded in runtime.sub_agents}  # type: ignore[union-attr]
    assert "plan" not in graphs["helper"].get_graph().nodes
    assert "plan" in graphs["careful"].get_graph().nodes and "plan" in runtime.graph.get_graph().nodes
