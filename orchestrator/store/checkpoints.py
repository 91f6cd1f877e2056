"""LangGraph's PostgreSQL checkpointer, without the process-wide lock when it has a pool.

`AsyncPostgresSaver` takes one `asyncio.Lock` around every checkpoint
operation, which a single shared connection needs. Over a connection pool each
operation gets a connection of its own, so the lock only makes the sessions of a
process queue behind one another: here it is not taken then. A turn's look at
whether questions wait reads the checkpoint its run reads next (see
`may_wait`). The checkpoint format and the queries stay LangGraph's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

# The channel of LangGraph's interrupt writes (its own constant is private since 1.0).
INTERRUPT = "__interrupt__"


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose operations over a pool run side by side, each on its own connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._peeked: dict[tuple[str, asyncio.Task[object] | None], CheckpointTuple | None] = {}

    async def may_wait(self, thread_id: str) -> bool:
        """Whether interrupts (questions) wait in the thread's latest checkpoint.

        LangGraph writes an interrupt for the task that raised it (a nested
        agent's too, through the tool that ran it) under the latest checkpoint.
        The checkpoint read is kept for the next read of the thread's latest
        checkpoint in the same task (the run that follows), which then costs
        no query; `forget` drops it when no run follows.
        """
        latest = await super().aget_tuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        )
        self._peeked[(thread_id, asyncio.current_task())] = latest
        writes = latest.pending_writes if latest is not None else None
        return any(channel == INTERRUPT for _, channel, _ in writes or ())

    def forget(self, thread_id: str) -> None:
        """Drop what `may_wait` read in this task for `thread_id`, if no run read it."""
        self._peeked.pop((thread_id, asyncio.current_task()), None)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        if not get_checkpoint_id(config) and not configurable.get("checkpoint_ns"):
            key = (configurable["thread_id"], asyncio.current_task())
            if key in self._peeked:  # read by may_wait just before, under the session's lease
                return self._peeked.pop(key)
        return await super().aget_tuple(config)

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[AsyncCursor[DictRow]]:
        pool = self.conn
        if not isinstance(pool, AsyncConnectionPool) or self.pipe is not None:
            async with super()._cursor(pipeline=pipeline) as cursor:  # one shared connection
                yield cursor
            return
        async with pool.connection() as conn:
            if not pipeline:
                async with conn.cursor(binary=True, row_factory=dict_row) as cursor:
                    yield cursor
            elif self.supports_pipeline:
                async with (
                    conn.pipeline(),
                    conn.cursor(binary=True, row_factory=dict_row) as cursor,
                ):
                    yield cursor
            else:
                async with (
                    conn.transaction(),
                    conn.cursor(binary=True, row_factory=dict_row) as cursor,
                ):
                    yield cursor
