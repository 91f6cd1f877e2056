"""The checkpointer: sessions of one process do not queue behind one lock; LangGraph reads it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from orchestrator.runtime import Runtime
from orchestrator.settings import load_settings
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.testing import ScriptedChatModel
from tests.helpers import storage_for

# Only a bound on a failure: with one lock for the process, the read below never ends.
NEVER = 60


def thread(name: str) -> dict[str, dict[str, str]]:
    return {"configurable": {"thread_id": f"{name}-{uuid.uuid4().hex[:8]}", "checkpoint_ns": ""}}


async def test_a_checkpoint_read_does_not_wait_for_another_sessions_operation(
    database_url: str, tmp_path: Path
):
    async with storage_for(database_url, tmp_path) as storage:
        saver = storage.checkpointer
        assert isinstance(saver, PooledPostgresSaver)
        async with saver._cursor(pipeline=True) as busy:  # another session's write, in progress
            await busy.execute("SELECT 1")
            read = await asyncio.wait_for(saver.aget_tuple(thread("other")), NEVER)

    assert read is None


async def test_langgraphs_own_saver_reads_the_sessions_checkpoints(
    database_url: str, tmp_path: Path
):
    async with storage_for(database_url, tmp_path) as storage:
        model = ScriptedChatModel(steps=["Hello."])
        runtime = Runtime.create(
            load_settings(), model=model, storage=storage, checkpointer=storage.checkpointer
        )
        session = runtime.session(user_id="u-checkpoints")
        await session.run("hi")
        plain = AsyncPostgresSaver(storage.checkpointer.conn)
        config = {"configurable": {"thread_id": session.session_id, "checkpoint_ns": ""}}
        stored = await plain.aget_tuple(config)

    assert stored is not None
    assert [m.text for m in stored.checkpoint["channel_values"]["messages"]] == ["hi", "Hello."]
