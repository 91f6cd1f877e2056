"""Issue 30: a plan shown: a live checklist in chat, `/plan`, and `plan` in `ask --json`."""

from __future__ import annotations

import asyncio
import io
import json
import re
import uuid
from pathlib import Path

import pytest
from langchain_core.tools import tool
from rich.console import Console, Group
from rich.text import Text

from orchestrator.conversation.session import TurnResult
from orchestrator.events import PlanEvent
from orchestrator.plans import PLAN_TOOL, PlanView
from orchestrator.terminal.checklist import PlanBoard, checklist
from orchestrator.terminal.render import TurnRenderer
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import EventLog, make_session, server_env
from tests.planning.test_plan_runs import Steps, plan_call, task


def view(*statuses: str, goal: str = "two steps", status: str = "running") -> PlanView:
    return {
        "id": "p1", "goal": goal, "status": status, "replans": 0, "replaced": [],  # type: ignore[typeddict-item]
        "tasks": [
            {"id": f"t{i}", "description": f"step {i}", "tool": "step", "status": s, "request_id": f"r{i}"}
            for i, s in enumerate(statuses, 1)
        ],
    }


def event(plan_id: str = "p1", *, plan: PlanView | None = None, under: str | None = None,
          task_id: str | None = None, status: str | None = None, depth: int = 0) -> PlanEvent:
    return PlanEvent(kind="plan", plan_id=plan_id, under=under, plan=plan, task=task_id, status=status,  # type: ignore[typeddict-item]
                     request_id=f"r{task_id[1:]}" if task_id else None, depth=depth)


def plain(markup_lines: list[str]) -> list[str]:
    return [Text.from_markup(line).plain for line in markup_lines]


def test_the_board_follows_task_changes_and_nests_an_agents_plan_under_its_task():
    board = PlanBoard()
    board.apply(event(plan=view("pending", "pending")))
    board.apply(event(task_id="t1", status="running"))
    below = view("done", goal="the agent's")
    below["id"], below["tasks"][0]["request_id"] = "p2", "r9"
    board.apply(event("p2", plan=below, under="r1", depth=1))
    board.apply(event(task_id="t2", status="failed"))

    assert plain(board.lines()) == [
        "plan: two steps",
        "  ◐ t1 step 1 · step · running",
        "    plan: the agent's",
        "      ✓ t1 step 1 · step · done",
        "  ✗ t2 step 2 · step · failed",
    ]
    assert not board.is_root("p2")
    board.drop("p1")
    assert board.lines() == [], "the agent's plan went with the task it ran under"


def test_replaced_tasks_show_as_re_planned_and_model_text_is_escaped():
    shown = view("done", goal="[red]x[/red] \x1b[2J")
    shown["replaced"] = [{"id": "t2", "description": "old", "tool": "step", "status": "failed", "request_id": None}]
    shown["replans"] = 1
    assert plain(checklist(shown)) == [
        "plan: [red]x[/red] \\x1b[2J · re-planned 1x",
        "  ↻ t2 old · step · re-planned",
        "  ✓ t1 step 1 · step · done",
    ]


async def test_piped_the_plan_is_printed_as_it_is_made_and_as_it_ends(scripted):
    steps = Steps()
    model = scripted(plan_call(task("t1", "step", name="a"), task("t2", "step", ("t1",), name="b")), "Done.")
    events = EventLog()
    result = await make_session(model, [steps.tool]).run("go", on_event=events)
    out, err = io.StringIO(), io.StringIO()
    options = {"force_terminal": False, "width": 200}
    render = TurnRenderer(out=Console(file=out, **options), err=Console(file=err, **options))

    for each in events:
        render(each)
    render.finish(result)

    assert err.getvalue().splitlines() == [
        "  tool create_execution_plan (1/1): success",
        "plan: the goal",
        "  ◐ t1 do t1 · step · running",
        "  ○ t2 do t2 · step · pending",
        "  tool step (1/2): success",
        "  tool step (2/2): success",
        "plan: the goal · done",
        "  ✓ t1 do t1 · step · done",
        "  ✓ t2 do t2 · step · done",
    ]
    assert out.getvalue() == "Done.\n"


def test_on_a_terminal_the_checklist_changes_in_place_above_the_spinner():
    err = io.StringIO()
    render = TurnRenderer(out=Console(file=io.StringIO(), force_terminal=False),
                          err=Console(file=err, force_terminal=True, width=120))
    render(event(plan=view("pending", "pending")))
    render(event(task_id="t1", status="running"))

    spinner = render._status.renderable  # type: ignore[union-attr]
    assert isinstance(spinner.text, Group)
    lines = [part.plain for part in spinner.text.renderables]  # type: ignore[union-attr]
    assert lines[:3] == ["plan: two steps", "  ◐ t1 step 1 · step · running", "  ○ t2 step 2 · step · pending"]

    render(event(plan=view("done", "done", status="done")))
    render.finish(TurnResult(answer="", answer_id=None, iterations=1))

    # The live frames are erased by cursor moves; what is printed for good stays between them.
    printed = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", err.getvalue())
    kept = ["plan: two steps · done\n", "  ✓ t1 step 1 · step · done\n", "  ✓ t2 step 2 · step · done\n"]
    places = [printed.find(line) for line in kept]
    assert -1 not in places and places == sorted(places), printed
    assert render.plans.lines() == [], "printed for good once it ended"


async def test_the_session_keeps_its_last_plan(scripted):
    steps = Steps()
    assert await make_session(scripted(), [steps.tool]).plan() is None

    model = scripted(plan_call(task("t1", "step", name="a")), "Done.", "Next.")
    session = make_session(model, [steps.tool])
    await session.run("go")
    await session.run("and now?")

    last = await session.plan()
    assert last is not None and last["status"] == "done" and last["tasks"][0]["status"] == "done"


async def test_a_cancelled_turn_cancels_its_plan_and_the_next_turn_runs_none_of_it(scripted):
    steps = Steps()
    entered = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait for ever."""
        entered.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = scripted(plan_call(task("t1", "wait"), task("t2", "step", ("t1",), name="after")), "Hello again.")
    session = make_session(model, [wait, steps.tool])
    turn = asyncio.ensure_future(session.run("go"))
    await entered.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn

    cancelled = await session.plan()
    assert cancelled is not None and cancelled["status"] == "cancelled"
    assert [t["status"] for t in cancelled["tasks"]] == ["failed", "skipped"], "t1 was running"
    assert (await session.run("hi")).answer == "Hello again."
    assert steps.runs == {}, "nothing of the cancelled plan ran later"


async def test_ask_json_has_the_plan_and_chat_shows_it_with_slash_plan(cli, tmp_path: Path):
    plan = {"goal": "two sums", "tasks": [
        {"id": "t1", "description": "first sum", "tool": "calculator", "arguments": {"expression": "2+2"}},
        {"id": "t2", "description": "second sum", "tool": "calculator",
         "arguments": {"expression": "{{t1.data.value}}*10"}, "depends_on": ["t1"]},
    ]}
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer([[(PLAN_TOOL, plan)], "It is 40."]) as server:
        asked = cli("ask", "--json", "-s", session, "two sums", cwd=tmp_path, env_extra=server_env(server))
        chat = cli("chat", "-s", session, cwd=tmp_path, stdin="/plan\n", env_extra=server_env(server))

    assert asked.returncode == 0, asked.stderr
    body = json.loads(asked.stdout)
    assert body["answer"] == "It is 40."
    assert body["plan"]["goal"] == "two sums"
    assert [{k: t[k] for k in ("id", "description", "tool", "status")} for t in body["plan"]["tasks"]] == [
        {"id": "t1", "description": "first sum", "tool": "calculator", "status": "done"},
        {"id": "t2", "description": "second sum", "tool": "calculator", "status": "done"},
    ]
    assert all(len(t["request_id"]) == 32 for t in body["plan"]["tasks"])
    results = json.loads(server.requests[1]["messages"][-1]["content"])["data"]["tasks"]
    assert results[1]["result"]["data"] == {"expression": "4*10", "value": 40}
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.splitlines()[:3] == [
        "plan: two sums · done",
        "  ✓ t1 first sum · calculator · done",
        "  ✓ t2 second sum · calculator · done",
    ]


async def test_in_chat_a_plan_is_shown_for_approval_and_edited_as_its_tasks(cli, tmp_path: Path):
    plan = {"goal": "a sum", "tasks": [
        {"id": "t1", "description": "the sum", "tool": "calculator", "arguments": {"expression": "1+1"}},
    ]}
    mine = [{"id": "t1", "description": "my sum", "tool": "calculator", "arguments": {"expression": "2+3"}}]
    session = f"s-{uuid.uuid4().hex[:8]}"
    with OpenAICompatibleServer([[(PLAN_TOOL, plan)], "It is 5."]) as server:
        chat = cli(
            "chat", "-s", session, cwd=tmp_path, stdin=f"a sum\ne\n{json.dumps(mine)}\n",
            env_extra={**server_env(server), "ORCHESTRATOR_APPROVE_PLANS": "1"},
        )

    assert chat.returncode == 0, chat.stderr
    assert "approval · orchestrator · create_execution_plan" in chat.stderr
    assert "    goal: a sum\n    t1 the sum: calculator {\"expression\": \"1+1\"}\n" in chat.stderr
    assert chat.stdout.strip() == "It is 5."
    told = json.loads(server.requests[1]["messages"][-1]["content"])
    assert told["message"].startswith("The user changed your plan before it ran")
    assert told["data"]["tasks"][0]["result"]["data"] == {"expression": "2+3", "value": 5}
