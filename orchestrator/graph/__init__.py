"""The agent graph: model node, router and tools node."""

from orchestrator.graph.builder import build_agent_graph
from orchestrator.graph.spec import AgentSpec
from orchestrator.graph.state import OrchestratorState

__all__ = ["AgentSpec", "OrchestratorState", "build_agent_graph"]
