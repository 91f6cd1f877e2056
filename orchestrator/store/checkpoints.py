"""LangGraph's PostgreSQL checkpointer, without the process-wide lock when it has a pool.

`AsyncPostgresSaver` takes one `asyncio.Lock` around every checkpoint
operation, which a single shared connection needs. Over a connection pool each
operation gets a connection of its own, so the lock only makes the sessions of a
process queue behind one another: here it is not taken then. A turn's look at
whether questions wait reads the checkpoint its run reads next (see
`may_wait`), a step's values are serialized in the loop rather than in a
worker thread (see `aput_writes`), and statements of ours that belong with a
task's writes commit in their transaction (see `ride_along`). The checkpoint
format and the queries stay LangGraph's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.types import (
    _DeltaSnapshot,  # pyright: ignore[reportPrivateUsage]  # LangGraph's aput tells delta snapshots so; private
)
from psycopg import AsyncCursor
from psycopg.abc import Params
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from orchestrator.store.written_values import WrittenValues

# The channel of LangGraph's interrupt writes (its own constant is private since 1.0).
INTERRUPT = "__interrupt__"


@dataclass(frozen=True)
class Rider:
    """Statements that commit in the transaction of a task's checkpoint writes.

    For what must not outlive the writes, nor cost a transaction of its own:
    a tool call's end in the request log, beside the result it records.
    `alone` writes them on their own (and reports its own failure) when no
    write takes them along: the writes failed with them, or the run stopped
    before the task's writes were saved.
    """

    thread_id: str
    statements: tuple[tuple[LiteralString, Params], ...]
    alone: Callable[[], Awaitable[None]]


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` whose operations over a pool run side by side, each on its own connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._peeked: dict[tuple[str, asyncio.Task[object] | None], CheckpointTuple | None] = {}
        self._riders: dict[str, list[Rider]] = {}  # by the id of the task they wait for
        self._written = WrittenValues()

    def ride_along(self, task_id: str, rider: Rider) -> None:
        """Commit `rider` with the next checkpoint writes of task `task_id`.

        The run's owner calls `drop_off` when the run ends, for riders whose
        task's writes never came.
        """
        self._riders.setdefault(task_id, []).append(rider)

    async def drop_off(self, thread_id: str) -> None:
        """Write on their own the riders of `thread_id` that no checkpoint write took along."""
        for task_id in [t for t, riders in self._riders.items() if riders[0].thread_id == thread_id]:
            for rider in self._riders.pop(task_id, []):
                await rider.alone()

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
        configurable = _configurable(config)
        if not get_checkpoint_id(config) and not configurable.get("checkpoint_ns"):
            key = (configurable["thread_id"], asyncio.current_task())
            if key in self._peeked:  # read by may_wait just before, under the session's lease
                return self._peeked.pop(key)
        return await super().aget_tuple(config)

    async def _load_checkpoint_tuple(self, value: DictRow) -> CheckpointTuple:
        """LangGraph's, without deserializing the blobs this process wrote (see `WrittenValues`)."""
        versions: dict[str, object] = value["checkpoint"].get("channel_versions") or {}
        thread_id, namespace = value["thread_id"], value["checkpoint_ns"]
        blobs: list[tuple[bytes, ...]] = []
        known: dict[str, object] = {}
        for blob in value["channel_values"] or ():
            channel = blob[0].decode()
            found, kept = self._written.read(thread_id, namespace, channel, versions.get(channel))
            if found:
                known[channel] = kept
            else:
                blobs.append(blob)
        loaded = await super()._load_checkpoint_tuple({**value, "channel_values": blobs})
        loaded.checkpoint["channel_values"].update(known)
        return loaded

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """`AsyncPostgresSaver.aput`, its values serialized in the loop (see `aput_writes`)."""
        configurable = _configurable(config)
        thread_id, checkpoint_ns = configurable["thread_id"], configurable["checkpoint_ns"]
        copy = checkpoint.copy()
        copy["channel_values"] = copy["channel_values"].copy()
        # Primitive values stay inline in the checkpoint row, the others go to blobs.
        blob_values: dict[str, object] = {}
        for key, value in checkpoint["channel_values"].items():
            if isinstance(value, _DeltaSnapshot):
                blob_values[key] = copy["channel_values"].pop(key)
                copy["channel_values"][key] = True
            elif not (value is None or isinstance(value, str | int | float | bool)):
                blob_values[key] = copy["channel_values"].pop(key)
        blob_versions = {k: v for k, v in new_versions.items() if k in blob_values}
        blobs = self._dump_blobs(thread_id, checkpoint_ns, blob_values, blob_versions) if blob_versions else []
        kept = {k: v for k, v in blob_values.items() if k in blob_versions and not isinstance(v, _DeltaSnapshot)}
        self._written.wrote(thread_id, checkpoint_ns, kept, blob_versions)
        async with self._cursor(pipeline=True) as cursor:
            if blobs:
                await cursor.executemany(self.UPSERT_CHECKPOINT_BLOBS_SQL, blobs)
            await cursor.execute(
                self.UPSERT_CHECKPOINTS_SQL,
                (
                    thread_id,
                    checkpoint_ns,
                    checkpoint["id"],
                    configurable.get("checkpoint_id"),
                    Jsonb(copy),
                    Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
                ),
            )
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint["id"]}
        }

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """`AsyncPostgresSaver.aput_writes`, its values serialized in the loop.

        LangGraph's saver serializes in a worker thread; for the few values of a
        step the hop costs more than the work, and the interpreter lock is held
        either way (measured under 50 sessions: 5% more turns a second).
        """
        known = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        configurable = _configurable(config)
        rows = self._dump_writes(
            configurable["thread_id"],
            configurable["checkpoint_ns"],
            configurable["checkpoint_id"],
            task_id,
            task_path,
            writes,
        )
        statement = self.UPSERT_CHECKPOINT_WRITES_SQL if known else self.INSERT_CHECKPOINT_WRITES_SQL
        riders = self._riders.pop(task_id, [])
        try:
            await self._put_writes(statement, rows, riders)
        except psycopg.Error:
            if not riders:
                raise
            # A rider's failure must not cost the writes: the riders go first, on their
            # own (as before they rode), then the writes without them.
            for rider in riders:
                await rider.alone()
            await self._put_writes(statement, rows, [])
        except BaseException:  # cancelled: the riders are written when the run ends
            self._riders.setdefault(task_id, []).extend(riders)
            raise

    async def _put_writes(
        self, statement: LiteralString, rows: Sequence[tuple[object, ...]], riders: list[Rider]
    ) -> None:
        """The writes, then the riders' statements, in one transaction: one pipeline."""
        async with self._cursor(pipeline=True) as cursor:
            await cursor.executemany(statement, rows)
            for rider in riders:
                for sql, values in rider.statements:
                    await cursor.execute(sql, values)

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncGenerator[AsyncCursor[DictRow], None]:
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


def _configurable(config: RunnableConfig) -> dict[str, Any]:
    """A run's `configurable` (its thread and checkpoint); LangGraph's savers require one."""
    return config.get("configurable") or {}
