"""The orchestrator's graph for `langgraph dev`: the peer side of `bench_server.py`.

`langgraph dev` loads `graph` from this file (the langgraph.json the bench writes
names it). It is the graph `orchestrator serve` runs, built from the same settings
(the bench's environment: its home with the approved no-op folder, its model on
the bench's local OpenAI-compatible server), without our storage and without a
checkpointer: `langgraph dev` keeps threads and checkpoints in its own memory, and
refuses a graph that brings a checkpointer of its own.
"""

from __future__ import annotations

from orchestrator.graph import build_agent_graph
from orchestrator.graph.builder import AgentGraph
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings


def _graph() -> AgentGraph:
    runtime = Orchestrator.create(load_settings())
    if runtime.spec is None:
        raise RuntimeError("the orchestrator's runtime has no spec to build the graph from")
    if not any(tool.name.startswith("noop") for tool in runtime.tools):
        raise RuntimeError(f"the no-op folder is not loaded: {[t.name for t in runtime.tools]}")
    return build_agent_graph(runtime.spec)


graph = _graph()
