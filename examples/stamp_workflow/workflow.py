"""A workflow of your own with an approved tool folder's action as one of its nodes: fetch -> stamp -> decide.

    orchestrator tools approve stamp_agent      # once, with ORCHESTRATOR_HOME=examples/stamp_workflow
    python examples/stamp_workflow/workflow.py "Quarterly report: all figures in."

`as_node` runs the action through the orchestrator's dispatch pipeline (the request
log, scope, approval, timeouts, usage) and writes its envelope into the state.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from orchestrator import Settings, as_node, load_settings

HERE = Path(__file__).resolve().parent
LONG_ENOUGH = 10  # characters: a shorter document goes back to its sender


class Flow(TypedDict, total=False):
    source: str  # where the document comes from (here, its text itself)
    document: str
    stamp_result: dict[str, object]  # the stamp action's envelope
    decision: str


def fetch(state: Flow) -> Flow:
    """Fetch the document (a real workflow would read a queue, a mailbox, a bucket)."""
    return {"document": state["source"].strip()}


def decide(state: Flow) -> Flow:
    """File the stamped document, or send it back when the stamp failed or it is too short."""
    result = state["stamp_result"]
    data = result["data"] if result["success"] else None
    if isinstance(data, dict) and int(data["length"]) >= LONG_ENOUGH:
        return {"decision": f"file: {data['stamped']}"}
    return {"decision": "send back"}


def build(settings: Settings | None = None) -> CompiledStateGraph:
    """The workflow, its stamp node run by the folders of `settings` (default: this example's)."""
    settings = settings or load_settings(sub_graphs_dir=HERE / "sub_graphs")
    stamp = as_node(
        "stamp_agent", "stamp", inputs={"target": "document"}, output_key="stamp_result",
        settings=settings,
    )
    graph = StateGraph(Flow)
    graph.add_node("fetch", fetch)
    graph.add_node("stamp", stamp)
    graph.add_node("decide", decide)
    graph.add_edge(START, "fetch")
    graph.add_edge("fetch", "stamp")
    graph.add_edge("stamp", "decide")
    graph.add_edge("decide", END)
    return graph.compile()


if __name__ == "__main__":
    text = " ".join(sys.argv[1:]) or "Quarterly report: all figures in."
    workflow = build()
    print(workflow.invoke({"source": text})["decision"])  # noqa: T201
    print(asyncio.run(workflow.ainvoke({"source": text}))["decision"])  # noqa: T201
