"""A process killed while it compacts a session's history: the session resumes cleanly (issue 29)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from sqlalchemy import text

from orchestrator.graph.builder import MODEL_NODE
from orchestrator.llm.summary import is_summary_request
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Database
from orchestrator.store.storage import Storage
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import JsonObject, Reply
from tests.helpers import server_env

WINDOW = 3000
FILLER = "The weather report said it would rain in the afternoon and clear up by evening. " * 3
USER = "local"  # whom `ask` runs as


class GatedSummaries(OpenAICompatibleServer):
    """Answers every call; a summary request waits for `gate` after saying it came."""

    def __init__(self) -> None:
        super().__init__(strict=True)
        self.summary_asked = threading.Event()
        self.gate = threading.Event()

    def next_reply(self, request: JsonObject) -> Reply | None:
        super().next_reply(request)
        messages = request["messages"]
        assert isinstance(messages, list)
        if is_summary_request(str(messages[0]["content"])):
            self.summary_asked.set()
            self.gate.wait(timeout=120)
            return "Summary: the person asked about the weather, over and over."
        return "The weather stays the same."


async def filled_session(settings_env: dict[str, object], session_id: str) -> list[str]:
    """A session whose next turn compacts: its messages written and archived as a chat's are."""
    settings = load_settings(**settings_env)
    storage = await Storage.open(settings)
    try:
        runtime = Orchestrator.create(settings, storage=storage)
        session = runtime.session(user_id=USER, session_id=session_id)
        history: list[BaseMessage] = []
        for n in range(30):  # past the window, once the system prompt and tools are in
            history.append(HumanMessage(f"Question {n}: {FILLER}", id=uuid.uuid4().hex))
            history.append(AIMessage(f"Answer {n}: {FILLER}", id=uuid.uuid4().hex))
        await session.graph.aupdate_state(session.config, {"messages": history}, as_node=MODEL_NODE)
        await session.open()
    finally:
        await storage.close()
    return [m.text for m in history]


async def test_a_process_killed_mid_summary_resumes_the_turn_and_loses_nothing(
    cli, tmp_path: Path, database_url: str, database: Database
):
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    with GatedSummaries() as server:
        said = await filled_session(
            {
                "database_url": database_url, "data_dir": tmp_path / "data",
                "sub_graphs_dir": tmp_path / "sub_graphs", "embeddings": "none",
                "context_tokens": WINDOW, "openai_base_url": server.base_url,
                "model": "openai:test-model", "openai_api_key": "test-key",
            },
            session_id,
        )
        env = {
            **os.environ, **server_env(server), "DATABASE_URL": database_url,
            "ORCHESTRATOR_EMBEDDINGS": "none", "ORCHESTRATOR_CONTEXT_TOKENS": str(WINDOW),
            "HOME": str(tmp_path),
        }
        child = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "ask", "-s", session_id, "And tomorrow?"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=env, text=True,
        )
        try:
            while not await asyncio.to_thread(server.summary_asked.wait, 0.1):
                assert child.poll() is None, f"it ended without compacting: {child.communicate()}"
        finally:
            child.kill()  # SIGKILL, while the summary is being written
            child.communicate(timeout=30)
        server.gate.set()

        resumed = cli(
            "chat", "-s", session_id, cwd=tmp_path,
            env_extra={**server_env(server), "ORCHESTRATOR_CONTEXT_TOKENS": str(WINDOW)},
        )

    assert resumed.returncode == 0, resumed.stderr
    assert f"finishing the interrupted turn of session {session_id}" in resumed.stderr
    assert resumed.stdout.strip() == "The weather stays the same."
    last = server.requests[-1]["messages"]
    assert "Summary: the person asked" in str(last[1]["content"]), "it resumed with a summary"
    assert last[-1]["content"] == "And tomorrow?"
    async with database.user_transaction(USER) as connection:
        stored = (
            await connection.execute(
                text("SELECT content FROM messages WHERE session_id = :s ORDER BY id"), {"s": session_id}
            )
        ).scalars().all()
    assert stored == [*said, "And tomorrow?", "The weather stays the same."], "each message once"
