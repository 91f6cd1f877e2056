"""Small builders shared by the tests."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.runtime import Runtime
from orchestrator.session import Session, TurnEvent
from orchestrator.settings import load_settings


def make_session(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    **settings: object,
) -> Session:
    """A session on a fresh in-memory graph over `model` and `tools`."""
    runtime = Runtime.create(
        load_settings(**settings), model=model, tools=list(tools), checkpointer=InMemorySaver()
    )
    return runtime.session(user_id="tester")


class EventLog(list[TurnEvent]):
    """Collects a turn's events; pass it as `on_event`."""

    def __call__(self, event: TurnEvent) -> None:
        self.append(event)

    def stages(self) -> list[str]:
        return [str(e["stage"]) for e in self if e["kind"] == "status"]

    def tool_phases(self) -> list[tuple[str, int, str]]:
        return [(e["tool"], e["index"], str(e["phase"])) for e in self if e["kind"] == "tool"]
