"""A folder's `include_tool_data: false` holds for its agent's level and those below (issue 46, item 7)."""

from __future__ import annotations

from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel
from tests.tool_folders import approve_all, parrot_agent


def test_an_agents_include_tool_data_holds_below_it_and_not_beside_it(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    parrot_agent(root, include_tool_data=False)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    approve_all(settings)
    runtime = Orchestrator.create(settings, model=ScriptedChatModel(), checkpointer=InMemorySaver())

    [parrot] = runtime.sub_agents
    [echo] = parrot.children
    assert parrot.level is not None and echo.level is not None
    assert parrot.level.limits.include_tool_data is False
    assert echo.level.limits.include_tool_data is False, "inherited below"
    assert runtime.spec is not None and runtime.spec.limits.include_tool_data is True, "not above"
