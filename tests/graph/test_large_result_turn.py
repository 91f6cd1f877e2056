"""A turn with a result too long for the model: a preview and a handle, and the reader offered (issue 46)."""

from __future__ import annotations

import json
import uuid

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.graph.builder import gave_handle
from orchestrator.levels import Limits
from orchestrator.store import Database
from orchestrator.testing import call_tools
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.results import READ_RESULT_TOOL, RESULT_HANDLE, ToolResult

LIMIT = 1000
REPORT = "".join(f"row {n:04d};" for n in range(2000))  # 18,000 characters


@tool
async def report() -> str:
    """A long report."""
    return REPORT


async def test_the_model_gets_a_preview_and_a_handle_then_reads_on_with_the_reader(
    scripted, database: Database
):
    offered: list[list[str]] = []
    made: list[str] = []
    user = f"ann-{uuid.uuid4().hex[:8]}"

    def first(messages: list[BaseMessage]) -> AIMessage:
        offered.append(list(model.bound_tools))
        return call_tools(("report", {}))

    def read_on(messages: list[BaseMessage]) -> AIMessage:
        offered.append(list(model.bound_tools))
        result = messages[-1]
        assert isinstance(result, ToolMessage) and isinstance(result.artifact, dict)
        handle = result.artifact["metadata"]["result_handle"]
        made.append(result.artifact["metadata"]["timestamp"])
        assert f'handle "{handle}" and offset {LIMIT}' in result.text
        return call_tools((READ_RESULT_TOOL, {"handle": handle, "offset": LIMIT, "length": 50}))

    def answer(messages: list[BaseMessage]) -> str:
        offered.append(list(model.bound_tools))
        return json.loads(messages[-1].text)["data"]["text"]

    model = scripted(first, read_on, answer)
    graph = build_agent_graph(
        AgentSpec(
            model=model,
            tools=[report],
            limits=Limits(max_iterations=3, max_result_chars=LIMIT, timeout_seconds=60.0),
        )
    )
    run = RunContext(user_id=user, database=UserDatabase(database, user))

    state = await graph.ainvoke({"messages": [("user", "read the report")]}, context=run)

    stamp = {"timestamp": made[0]}
    whole = json.dumps({"status": "success", "metadata": stamp, "message": REPORT}, ensure_ascii=False)
    assert state["messages"][-1].text == whole[LIMIT : LIMIT + 50]
    assert offered[0] == ["report"], "no handle yet: the reader is not offered"
    assert READ_RESULT_TOOL in offered[1] and READ_RESULT_TOOL in offered[2]
    model.assert_complete()


def test_a_background_jobs_or_a_plans_report_of_a_kept_result_offers_the_reader_too():
    kept = ToolResult(message="y" * 5000, metadata={RESULT_HANDLE: "result:abc"})
    cut = ToolResult(message="y" * 5000)
    report = HumanMessage(f"[background job j1 ended] {kept.to_model_text(max_chars=LIMIT)}")

    plan = ToolMessage(json.dumps({"tasks": [{"result": kept.to_model_text(max_chars=LIMIT)}]}), tool_call_id="p1")

    assert gave_handle([HumanMessage("hi"), report, AIMessage("It ended.")])
    assert gave_handle([plan]), "a plan's report holds its tasks' notes inside JSON strings"
    assert not gave_handle([HumanMessage(cut.to_model_text(max_chars=LIMIT))])
