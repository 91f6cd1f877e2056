"""The person's decisions keep the shape of LangChain v1's human in the loop, without importing it."""

from __future__ import annotations

from langchain.agents.middleware import human_in_the_loop as langchain_hitl
from pydantic import TypeAdapter

from orchestrator.tools import decisions


def test_decisions_have_the_schema_of_langchains_human_in_the_loop():
    """A client that answers LangChain's interrupts answers ours, and the schema sent with each is the same."""
    for name in ("Decision", "ActionRequest", "Action"):
        ours = TypeAdapter(getattr(decisions, name)).json_schema()
        assert ours == TypeAdapter(getattr(langchain_hitl, name)).json_schema(), name
