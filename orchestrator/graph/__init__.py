"""The agent graph: model node, router and tools node."""

from orchestrator.graph.builder import build_agent_graph
from orchestrator.graph.state import AgentState

__all__ = ["AgentState", "build_agent_graph"]
