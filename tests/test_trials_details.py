"""Issue 27, item 19 (part): MCP results, the manual's MCP example, background tasks, new-agent."""

from __future__ import annotations

import asyncio
import io
import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from mcp.types import CallToolResult, TextContent
from rich.console import Console
from sqlalchemy import text

from orchestrator.cli.render import TurnRenderer
from orchestrator.cli.scaffold import create_agent_folder
from orchestrator.folders.tool_config import ToolConfig, load_tool_config
from orchestrator.notes import is_note, note
from orchestrator.sources.adapter import langchain_tools
from orchestrator.sources.mcp.content import tool_result
from orchestrator.store import MessageStore
from orchestrator.store.sessions import claim_session
from orchestrator.testing import call_tools
from orchestrator.tools import ToolRequest, ToolResult, action
from orchestrator.tools.agent import AgentTool
from tests.helpers import run_cli
from tests.test_background import Nothing, Slow, runtime, slow_tools
from tests.test_mcp_folders import Person, call, started

MCP_PAGE = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"


# --- MCP results and the manual's example -----------------------------------------------------


def test_an_mcp_results_json_text_becomes_its_data():
    record = {"timezone": "Asia/Tokyo", "is_dst": False}
    as_text = tool_result(CallToolResult(content=[TextContent(type="text", text=json.dumps(record))]))
    listed = tool_result(CallToolResult(content=[TextContent(type="text", text=" [1, 2] ")]))

    assert (as_text.status, as_text.message, as_text.data) == ("success", "", record)
    assert listed.data == [1, 2] and listed.message == ""


def test_text_that_is_no_json_object_stays_the_message():
    for body in ("42", "true", "{not json", '"quoted"', "[" * 100_000):
        result = tool_result(CallToolResult(content=[TextContent(type="text", text=body)]))
        assert (result.message, result.data) == (body, None)
    two = [TextContent(type="text", text="{}"), TextContent(type="text", text="{}")]
    assert tool_result(CallToolResult(content=two)).data is None, "only one block is all of it"
    failed = tool_result(
        CallToolResult(content=[TextContent(type="text", text='{"error": "x"}')], isError=True)
    )
    assert failed.message == '{"error": "x"}', "an error keeps its words for the model"


def readme_mcp_example() -> str:
    """The YAML of the manual's section "MCP servers as tool folders" (docs/mcp.md), as printed."""
    section = MCP_PAGE.read_text().split("## MCP servers as tool folders", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the section shows a tool_config.yaml"
    return found.group(1)


async def test_the_readmes_mcp_example_runs_as_written(tmp_path: Path):
    folder = tmp_path / "sub_graphs" / "time"  # where the manual says to save it
    folder.mkdir(parents=True)
    (folder / "tool_config.yaml").write_text(readme_mcp_example())

    async with started(Person()) as runtime:
        result = await call(runtime, "time_get_current_time", {"timezone": "Asia/Tokyo"})

    assert result.status == "success", result.message
    assert isinstance(result.data, dict) and result.data["timezone"] == "Asia/Tokyo"
    assert result.data["datetime"].endswith("+09:00")


# --- new-agent ----------------------------------------------------------------------------------


def test_the_agent_templates_default_description_reads_well(tmp_path: Path):
    folder = create_agent_folder("trip_planner", directory=tmp_path, kind="agent")
    config = load_tool_config(folder / "tool_config.yaml")

    prompt = AgentTool(name=config.name, description=config.description).system_prompt(
        config.instructions
    )

    # What the model above reads to choose the agent, and the agent's own first sentence.
    assert config.description == "Handles trip planner requests with its own tools."
    assert prompt.split(". ")[0] == (
        "You are trip_planner, an agent that handles trip planner requests with its own tools"
    )
    assert "replace" not in config.description and ".." not in prompt


def test_new_agent_in_a_parent_puts_the_folder_under_that_agent(tmp_path: Path):
    run_cli("new-agent", "trip", "--kind", "agent", cwd=tmp_path)

    by_name = run_cli("new-agent", "flights", "--in", "trip", cwd=tmp_path)
    by_path = run_cli("new-agent", "hotels", "--in", "sub_graphs/trip", "--kind", "agent", cwd=tmp_path)
    nowhere = run_cli("new-agent", "cars", "--in", "no_such_agent", cwd=tmp_path)

    children = tmp_path / "sub_graphs" / "trip" / "src" / "sub_graphs"
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout.startswith("created sub_graphs/trip/src/sub_graphs/flights; ")
    assert (children / "flights" / "flights_tool.py").is_file()
    assert by_path.returncode == 0, by_path.stderr
    assert load_tool_config(children / "hotels" / "tool_config.yaml").kind == "agent"
    listing = json.loads(run_cli("tools", "list", "--json", cwd=tmp_path).stdout)
    assert sorted(t["key"] for t in listing["tools"]) == [
        "trip", "trip/src/sub_graphs/flights", "trip/src/sub_graphs/hotels"
    ]
    assert nowhere.returncode == 1
    assert nowhere.stderr.startswith("error: --in 'no_such_agent': no tool folder there")
    assert not list(tmp_path.rglob("cars"))


# --- background tasks ---------------------------------------------------------------------------


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
    await app.tasks.drain()

    follow_up = model.received[2]
    assert isinstance(follow_up[0], SystemMessage), "the system prompt comes first"
    assert not any(isinstance(m, SystemMessage) for m in follow_up[1:]), (
        "no system message mid-conversation: many local chat templates refuse one"
    )
    report = follow_up[-1]
    assert isinstance(report, HumanMessage) and is_note(report)
    assert "Background task" in report.text and "slow work done" in report.text


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
    [task] = app.tasks.of_session(session.session_id)
    gate.set()
    await app.tasks.drain()

    assert task.started_at <= tool.began[0], "its start is the call's, not the handover's"
    assert f"tool slow_work (1/1): moved to the background as task {task.task_id}" in err.getvalue()


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
