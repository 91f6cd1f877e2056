"""LangGraph's PostgreSQL checkpointer, without the process-wide lock when it has a pool.

`AsyncPostgresSaver` takes one `asyncio.Lock` around every checkpoint
operation, which a single shared connection needs. Over a connection pool each
operation gets a connection of its own, so the lock only makes the sessions of a
process queue behind one another: here it is not taken then. The checkpoint
format and the queries stay LangGraph's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg import AsyncCursor
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

# An interrupt LangGraph wrote for a task of the thread's latest top-level checkpoint.
MAY_WAIT = """
SELECT EXISTS (
    SELECT 1 FROM checkpoint_writes
    WHERE thread_id = %(thread)s AND checkpoint_ns = '' AND channel = '__interrupt__'
      AND checkpoint_id = (
          SELECT checkpoint_id FROM checkpoints
          WHERE thread_id = %(thread)s AND checkpoint_ns = ''
          ORDER BY checkpoint_id DESC LIMIT 1
      )
) AS may_wait
"""


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose operations over a pool run side by side, each on its own connection."""

    async def may_wait(self, thread_id: str) -> bool:
        """Whether the thread's state may hold interrupts (questions), without loading it.

        False is certain: LangGraph writes an interrupt for the task that raised
        it (a nested agent's too, through the tool that ran it) under the latest
        checkpoint. True is for `aget_state` to confirm.
        """
        async with self._cursor() as cursor:
            await cursor.execute(MAY_WAIT, {"thread": thread_id})
            row = await cursor.fetchone()
        return bool(row and row["may_wait"])

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
