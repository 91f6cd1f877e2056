"""Small builders shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.runtime import Runtime
from orchestrator.session import Session, TurnEvent
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer


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


def run_cli(
    *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "HOME": str(cwd), "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=120,
    )


def server_env(server: OpenAICompatibleServer) -> dict[str, str]:
    return {
        "ORCHESTRATOR_MODEL": "openai:test-model",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        "ORCHESTRATOR_MODEL_MAX_RETRIES": "0",
    }
