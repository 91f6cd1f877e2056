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


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose operations over a pool run side by side, each on its own connection."""

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
