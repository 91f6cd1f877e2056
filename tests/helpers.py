"""Small builders shared by the tests."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from sqlalchemy import text

from orchestrator.runtime import Runtime
from orchestrator.session import Session, TurnEvent
from orchestrator.settings import load_settings
from orchestrator.store import Database
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


async def start_and_kill(
    tmp_path: Path,
    session: str,
    env: dict[str, str],
    started: Path,
    *,
    ready: Callable[[], Awaitable[bool]] | None = None,
) -> str:
    """Run `chat` until the tool started (and `ready()` holds), then SIGKILL it.

    The id of the request it left running.
    """
    with open(tmp_path / "first.out", "w") as out, open(tmp_path / "first.err", "w") as err:
        first = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "chat", "-s", session],
            stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=tmp_path, env=env, text=True,
        )
        first.stdin.write("y\nrun it\n")
        first.stdin.flush()
        for _ in range(600):
            if started.exists() and (ready is None or await ready()):
                break
            assert first.poll() is None, (tmp_path / "first.err").read_text()
            await asyncio.sleep(0.05)
        first.kill()
        first.wait(timeout=30)
    return started.read_text()


async def closing_order(database: Database, user: str, request_ids: list[str]) -> list[str]:
    async with database.user_transaction(user) as connection:
        rows = await connection.execute(
            text("SELECT request_id FROM request_events WHERE status = 'closed' AND request_id = ANY(:ids) ORDER BY id"),
            {"ids": request_ids},
        )
        return [row[0] for row in rows]
