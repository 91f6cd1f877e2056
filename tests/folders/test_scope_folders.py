"""AI scope end to end: a folder's parameters choices at every level of the tree."""

from __future__ import annotations

import logging
from pathlib import Path

from langchain_core.messages import ToolMessage

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import call_tools
from tests.helpers import tool_json
from tests.tool_folders import three_levels, write_folder

FETCH_TOOL = '''
from typing import Annotated

from pydantic import BaseModel, Field

from orchestrator.tools import NotAI, Tool, ToolRequest, ToolResult, action


class FetchParams(BaseModel):
    city: str = Field(description="Which city.")
    region: str = Field(default="eu", description="Which region's service.")
    api_key: Annotated[str, NotAI] = Field(description="The service's key.")


class Fetcher(Tool):
    @action
    async def fetch(self, params: FetchParams, request: ToolRequest) -> ToolResult:
        """Fetch the weather of a city."""
        return request.result(f"{params.city} in {params.region} with {params.api_key}")
'''

LEAF = {
    "name": "leaf",
    "description": "Fetches weather.",
    "version": "1",
    "parameters": {"api_key": {"value": "key-123"}, "region": {"value": "us"}},
}


def runtime_over(root: Path, model: object) -> Orchestrator:
    settings = load_settings(sub_graphs_dir=root, data_dir=root.parent / "data")
    return Orchestrator.create(settings, model=model, ask=lambda folder, status: True)  # type: ignore[arg-type]


def schema_of(runtime: Orchestrator, name: str) -> dict[str, object]:
    tool = next(t for t in runtime.all_tools() if t.name == name)
    return dict(tool.tool_call_schema)  # type: ignore[arg-type]


async def test_three_levels_down_the_model_sees_and_sets_only_its_own_parameters(
    scripted, tmp_path: Path
):
    root = tmp_path / "sub_graphs"
    three_levels(root, leaf_config=LEAF, leaf_code=FETCH_TOOL)
    model = scripted(
        call_tools(("top_ask", {"request": "weather"})),
        call_tools(("mid_ask", {"request": "weather"})),
        call_tools(("leaf_fetch", {"city": "Oslo"}), ("leaf_fetch", {"city": "Rome", "api_key": "mine"})),
        "mid done",
        "top done",
        "all done",
    )
    runtime = runtime_over(root, model)

    assert list(schema_of(runtime, "leaf_fetch")["properties"]) == ["city"]
    result = await runtime.session(user_id="u").run("go")

    assert result.answer == "all done"
    mid_round = model.received[3]  # what mid's model saw after its two calls
    answers = [tool_json(m.text) for m in mid_round if isinstance(m, ToolMessage)]
    assert answers[0] == {"status": "success", "message": "Oslo in us with key-123"}
    assert answers[1]["error_code"] == "invalid_arguments"
    assert "'api_key'" in answers[1]["message"] and "key-123" not in answers[1]["message"]


def test_a_forbidden_ai_choice_skips_the_folder_with_a_clear_line(scripted, tmp_path: Path, caplog):
    root = tmp_path / "sub_graphs"
    write_folder(root, "leaf", config={**LEAF, "parameters": {"api_key": "ai"}}, code=FETCH_TOOL)
    write_folder(root, "echo")

    with caplog.at_level(logging.WARNING):
        runtime = runtime_over(root, scripted())

    assert [t.name for t in runtime.tools] == ["current_time", "calculator", "ask_human", "request_authorization", "echo_say"]
    [line] = [r.getMessage() for r in caplog.records if "leaf" in r.getMessage()]
    assert f"skipping tool folder {root / 'leaf'}" in line and "api_key" in line
