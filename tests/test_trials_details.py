"""Issue 27, item 19 (part): MCP results, the README's MCP example, background tasks, new-agent."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp.types import CallToolResult, TextContent

from orchestrator.cli.scaffold import create_agent_folder
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.config import load_tool_config
from orchestrator.tools.mcp.content import tool_result
from tests.helpers import run_cli
from tests.test_mcp_folders import Person, call, started

README = Path(__file__).resolve().parents[1] / "README.md"


# --- MCP results and the README's example -----------------------------------------------------


def test_an_mcp_results_json_text_becomes_its_data():
    record = {"timezone": "Asia/Tokyo", "is_dst": False}
    as_text = tool_result(CallToolResult(content=[TextContent(type="text", text=json.dumps(record))]))
    listed = tool_result(CallToolResult(content=[TextContent(type="text", text=" [1, 2] ")]))

    assert (as_text.status, as_text.message, as_text.data) == ("success", "", record)
    assert listed.data == [1, 2] and listed.message == ""


def test_text_that_is_no_json_object_stays_the_message():
    for text in ("42", "true", "{not json", '"quoted"', "[" * 100_000):
        result = tool_result(CallToolResult(content=[TextContent(type="text", text=text)]))
        assert (result.message, result.data) == (text, None)
    two = [TextContent(type="text", text="{}"), TextContent(type="text", text="{}")]
    assert tool_result(CallToolResult(content=two)).data is None, "only one block is all of it"
    failed = tool_result(
        CallToolResult(content=[TextContent(type="text", text='{"error": "x"}')], isError=True)
    )
    assert failed.message == '{"error": "x"}', "an error keeps its words for the model"


def readme_mcp_example() -> str:
    """The YAML of the README's section "MCP servers as tool folders", as printed."""
    section = README.read_text().split("### MCP servers as tool folders", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the section shows a tool_config.yaml"
    return found.group(1)


async def test_the_readmes_mcp_example_runs_as_written(tmp_path: Path):
    folder = tmp_path / "sub_graphs" / "time"  # where the README says to save it
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
