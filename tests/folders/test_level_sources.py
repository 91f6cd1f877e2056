"""`sources=` reaches a level below the top: `AtLevel(path, source)` adds its tools to that agent's."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, tool

from orchestrator.errors import DeveloperError
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.level_sources import AtLevel
from orchestrator.sources.static import StaticSource
from orchestrator.testing import ScriptedChatModel, call_tools
from tests.tool_folders import three_levels


def approve_all(folder: object, status: object) -> bool:
    return True


def stamp_tool(stamped: list[str]) -> BaseTool:
    @tool
    def stamp(text: str) -> str:
        """Stamp the text."""
        stamped.append(text)
        return f"stamped {text}"

    return stamp


class Opened:
    """A source whose tools exist only once it is open, and which says when it closed."""

    name = "opened"

    def __init__(self, tools: Sequence[BaseTool]) -> None:
        self._tools = list(tools)
        self.is_open = False
        self.closed = False

    async def open(self) -> None:
        self.is_open = True

    def tools(self) -> Sequence[BaseTool]:
        assert self.is_open, "asked for its tools before it was opened"
        return self._tools

    async def close(self) -> None:
        self.closed = True


def tool_names(tools: Sequence[BaseTool]) -> set[str]:
    return {t.name for t in tools}


async def test_a_source_given_for_a_nested_level_is_offered_there_and_used(tmp_path: Path, scripted):
    root = tmp_path / "sub_graphs"
    three_levels(root)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    stamped: list[str] = []
    model = scripted(
        call_tools(("top_ask", {"request": "stamp it"})),
        call_tools(("mid_ask", {"request": "stamp it"})),
        call_tools(("stamp", {"text": "it"})),  # mid's model: the stamp is its tool
        "mid done",
        "top done",
        "all done",
    )
    source = StaticSource("stamps", [stamp_tool(stamped)])

    runtime = Orchestrator.create(
        settings, model=model, ask=approve_all, sources=[AtLevel(("top", "mid"), source)]
    )
    result = await runtime.session(user_id="u").run("go")

    assert result.answer == "all done" and stamped == ["it"]
    loaded = {each.folder.name: each for each in runtime.loaded_folders()}
    assert "stamp" in tool_names(loaded["mid"].tool.tools)
    assert "stamp" not in tool_names(loaded["top"].tool.tools), "only the level it was given for"
    assert "stamp" not in tool_names(runtime.tools)


async def test_start_opens_a_nested_levels_source_before_the_folders_load_and_closes_it(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    three_levels(root)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    source = Opened([stamp_tool([])])

    runtime = await Orchestrator.start(
        settings, model=ScriptedChatModel(), ask=approve_all, sources=[AtLevel(("top",), source)]
    )
    loaded = {each.folder.name: each for each in runtime.loaded_folders()}
    await runtime.close()

    assert "stamp" in tool_names(loaded["top"].tool.tools)
    assert source.closed


def test_a_source_for_a_level_no_agent_has_is_said_in_the_log(tmp_path: Path, caplog):
    root = tmp_path / "sub_graphs"
    three_levels(root)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    source = StaticSource("stamps", [stamp_tool([])])

    with caplog.at_level(logging.WARNING, logger="orchestrator.sources.level_sources"):
        Orchestrator.create(
            settings, model=ScriptedChatModel(), ask=approve_all, sources=[AtLevel(("nobody",), source)]
        )

    assert [r.getMessage() for r in caplog.records] == [
        "tool source stamps is for nobody, and no agent folder loaded there: its tools are not offered"
    ]


def test_a_source_for_a_nested_level_needs_a_path_and_the_folders(tmp_path: Path):
    settings = load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")
    source = StaticSource("stamps", [stamp_tool([])])

    with pytest.raises(DeveloperError, match="needs an agent's path"):
        AtLevel((), source)
    with pytest.raises(DeveloperError, match="need the tool folders"):
        Orchestrator.create(
            settings, model=ScriptedChatModel(), tools=[], sources=[AtLevel(("top",), source)]
        )
