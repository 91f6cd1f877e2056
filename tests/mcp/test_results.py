"""MCP results as the model gets them, and the manual's MCP example run as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp.types import CallToolResult, TextContent

from orchestrator.sources.mcp.content import tool_result
from tests.mcp.test_folders import Person, call, started

MCP_PAGE = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


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


def manual_mcp_example() -> str:
    """The YAML of the manual's section "MCP servers as tool folders" (docs/mcp.md), as printed."""
    section = MCP_PAGE.read_text().split("## MCP servers as tool folders", 1)[1]
    found = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the section shows a tool_config.yaml"
    return found.group(1)


@pytest.mark.process
async def test_the_manuals_mcp_example_runs_as_written(tmp_path: Path):
    folder = tmp_path / "sub_graphs" / "time"  # where the manual says to save it
    folder.mkdir(parents=True)
    (folder / "tool_config.yaml").write_text(manual_mcp_example())

    async with started(Person()) as runtime:
        result = await call(runtime, "time_get_current_time", {"timezone": "Asia/Tokyo"})

    assert result.status == "success", result.message
    assert isinstance(result.data, dict) and result.data["timezone"] == "Asia/Tokyo"
    assert result.data["datetime"].endswith("+09:00")
