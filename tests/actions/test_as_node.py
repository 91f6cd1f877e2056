"""`as_node`: an approved action as a node of a workflow of your own, sync and async (issue 32)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from orchestrator import as_node
from orchestrator.errors import UserError
from orchestrator.folders.approvals import review_folders
from orchestrator.settings import Settings, load_settings
from orchestrator.store.logins import Logins
from tests.actions.conftest import EXAMPLE, approve_all
from tests.tool_folders import write_folder


def example_workflow() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stamp_workflow", EXAMPLE / "workflow.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_on(logins: Logins, home: Path, sub_graphs: Path) -> Settings:
    return load_settings(
        database_url=logins.owner_url, database_app_url=logins.app_url, data_dir=home / "data",
        sub_graphs_dir=sub_graphs, embeddings="none",
    )


def test_the_example_workflow_runs_the_action_as_a_node_sync_and_async(
    tmp_path: Path, database_logins: Logins, closing_hosts: None
):
    settings = settings_on(database_logins, tmp_path, EXAMPLE / "sub_graphs")
    review_folders(settings, approve_all)
    workflow = example_workflow().build(settings)

    filed = workflow.invoke({"source": "  Quarterly report: all figures in.  "})
    sent_back = asyncio.run(workflow.ainvoke({"source": "Too short"}))

    assert filed["decision"] == "file: [RECEIVED] Quarterly report: all figures in."
    envelope = filed["stamp_result"]
    assert envelope["success"] and envelope["metadata"]["operation"] == "stamp_agent.stamp"
    assert envelope["data"] == {
        "stamped": "[RECEIVED] Quarterly report: all figures in.", "mark": "RECEIVED", "length": 33,
    }
    assert sent_back["decision"] == "send back"
    assert sent_back["stamp_result"]["data"]["length"] == 9


def test_a_folder_that_is_not_approved_is_refused_when_the_node_is_made(
    tmp_path: Path, database_logins: Logins, closing_hosts: None
):
    settings = settings_on(database_logins, tmp_path, EXAMPLE / "sub_graphs")

    with pytest.raises(UserError, match="'stamp_agent' is not approved: approve it with"):
        as_node("stamp_agent", "stamp", inputs={"target": "document"}, output_key="out", settings=settings)


class Flow(TypedDict, total=False):
    words: str
    echoed: dict[str, object]


async def test_a_sensitive_action_pauses_the_workflow_and_goes_on_once_approved(
    tmp_path: Path, database_logins: Logins, closing_hosts: None
):
    config = {"name": "echo", "description": "Repeats.", "version": "1.0", "requires_approval": True}
    write_folder(tmp_path / "sub_graphs", "echo", config=config)
    settings = settings_on(database_logins, tmp_path, tmp_path / "sub_graphs")
    review_folders(settings, approve_all)
    builder = StateGraph(Flow)
    builder.add_node(
        "echo",
        as_node("echo", "say", inputs=lambda state: {"text": state["words"], "times": 2},
                output_key="echoed", settings=settings),
    )
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}

    paused = await graph.ainvoke({"words": "careful"}, thread)
    (question,) = paused["__interrupt__"]
    assert question.value["kind"] == "approval" and question.value["action"]["name"] == "echo_say"

    done = await graph.ainvoke(Command(resume={question.id: {"type": "approve"}}), thread)
    assert done["echoed"]["success"] and done["echoed"]["message"] == "careful careful"
    assert done["echoed"]["metadata"]["request_id"] == question.value["request_id"], (
        "the resumed node is the same request"
    )


async def test_a_result_too_long_for_a_model_comes_whole_with_its_handle(
    tmp_path: Path, database_logins: Logins, closing_hosts: None
):
    write_folder(tmp_path / "sub_graphs", "echo")
    settings = settings_on(database_logins, tmp_path, tmp_path / "sub_graphs")
    review_folders(settings, approve_all)
    part = "".join(f"{n:07d}." for n in range(5000))  # 40,000 characters
    node = as_node("echo", "say", inputs=lambda state: {"text": state["words"], "times": 5},
                   output_key="echoed", settings=settings)

    update = await node.ainvoke({"words": part})

    envelope = update["echoed"]
    assert envelope["message"] == " ".join([part] * 5), "the whole result, 200,004 characters"
    assert envelope["metadata"]["result_handle"].startswith("result:")
