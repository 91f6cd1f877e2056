"""Tests of $name: pytest sub_graphs/$name/tests"""

import asyncio
from pathlib import Path

from orchestrator.testing import load_tool_folder
from orchestrator.tools import ToolRequest

FOLDER = Path(__file__).resolve().parents[1]


def test_greet() -> None:
    tool = load_tool_folder(FOLDER)
    request = ToolRequest(request_id="r1", action="greet", parameters={"who": "Ada"})

    result = asyncio.run(tool.execute(request))

    assert result.status == "success"
    assert result.message == "Hello, Ada!"
    assert result.request_id == "r1"
