"""The assistants `orchestrator serve` offers: the orchestrator, and with `--agents` each agent folder.

An assistant is named by its id (a UUID derived from its name, the same at every
start) or by its graph's name (`orchestrator`, an agent folder's name), as
`langgraph dev` lets a client name a graph.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import JsonValue

from orchestrator.errors import RequestRefusedError, UserError
from orchestrator.runtime import Orchestrator
from orchestrator.tools.agent import AgentTool

ORCHESTRATOR = "orchestrator"
NAMESPACE = uuid.UUID("6f1c1f8e-3c1a-4d0e-9a57-3b9d1c0c2a10")  # ours: ids are uuid5 of the name


@dataclass(frozen=True)
class Assistant:
    """One assistant: its id, its graph's name, the runtime its runs use."""

    assistant_id: str
    graph_id: str
    runtime: Orchestrator
    description: str

    def to_json(self, *, started: datetime) -> dict[str, JsonValue]:
        """As the API's `Assistant`."""
        return {
            "assistant_id": self.assistant_id,
            "graph_id": self.graph_id,
            "name": self.graph_id,
            "description": self.description,
            "config": {},
            "context": {},
            "metadata": {"created_by": "system"},
            "version": 1,
            "created_at": started.isoformat(),
            "updated_at": started.isoformat(),
        }


class Assistants:
    """The assistants of one server, fixed at its start."""

    def __init__(self, runtime: Orchestrator, *, agents: bool = False) -> None:
        self.started = datetime.now(UTC)
        main = _assistant(ORCHESTRATOR, runtime, "The orchestrator: its tools and agent folders.")
        self._all = [main, *(_agents(runtime) if agents else [])]

    def all(self) -> list[Assistant]:
        """Every assistant, the orchestrator first."""
        return list(self._all)

    def named(self, name: str) -> Assistant:
        """The assistant with this id or graph name (`RequestRefusedError` 404: none)."""
        for assistant in self._all:
            if name in (assistant.assistant_id, assistant.graph_id):
                return assistant
        raise RequestRefusedError(404, f"assistant {name} not found")


def _assistant(name: str, runtime: Orchestrator, description: str) -> Assistant:
    return Assistant(str(uuid.uuid5(NAMESPACE, name)), name, runtime, description)


def _agents(runtime: Orchestrator) -> list[Assistant]:
    found: list[Assistant] = []
    for loaded in runtime.sub_agents:
        if not isinstance(loaded.tool, AgentTool):
            continue
        try:
            alone = runtime.for_agent(loaded.folder.name)
        except UserError:  # not an agent on its own (no level): the orchestrator still calls it
            continue
        found.append(_assistant(loaded.folder.name, alone, loaded.tool.description))
    return found
