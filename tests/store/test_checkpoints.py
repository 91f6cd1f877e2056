"""The checkpointer: sessions of one process do not queue behind one lock; LangGraph reads it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import TypedDict

from langchain_core.tools import tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from psycopg import AsyncCursor
from sqlalchemy import text

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store.checkpoints import INTERRUPT, PooledPostgresSaver
from orchestrator.testing import ScriptedChatModel, call_tools
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
        runtime = Orchestrator.create(
            load_settings(), model=model, storage=storage, checkpointer=storage.checkpointer
        )
        session = runtime.session(user_id="u-checkpoints")
        await session.run("hi")
        plain = AsyncPostgresSaver(storage.checkpointer.conn)
        config = {"configurable": {"thread_id": session.session_id, "checkpoint_ns": ""}}
        stored = await plain.aget_tuple(config)

    assert stored is not None
    assert [m.text for m in stored.checkpoint["channel_values"]["messages"]] == ["hi", "Hello."]


async def test_a_stored_turn_reads_its_checkpoint_once_and_archives_what_it_added(
    database_url: str, tmp_path: Path, monkeypatch
):
    reads: list[str] = []  # queries that read the checkpoint tables
    execute = AsyncCursor.execute

    async def counted(self: AsyncCursor, query: object, *args: object, **kwargs: object) -> object:
        sql = " ".join(str(query).split()).lower()
        if sql.startswith("select") and "checkpoint" in sql:
            reads.append(sql)
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(AsyncCursor, "execute", counted)
    async with storage_for(database_url, tmp_path) as storage:
        model = ScriptedChatModel(steps=["Hello.", "Again."])
        runtime = Orchestrator.create(
            load_settings(), model=model, storage=storage, checkpointer=storage.checkpointer
        )
        session = runtime.session(user_id="u-reads")
        reads.clear()  # the checkpointer's setup
        first = await session.run("hi")
        reads_of_first = len(reads)
        second = await session.run("once more")
        async with storage.database.admin_transaction() as connection:
            archived = await connection.scalars(
                text("SELECT content FROM messages WHERE session_id = :id"), {"id": session.session_id}
            )
            archived = sorted(archived)

    assert (first.answer, second.answer) == ("Hello.", "Again.")
    # the look for waiting questions reads the checkpoint the run then starts from
    assert reads_of_first == 1 and len(reads) == 2, "one read a turn"
    assert archived == ["Again.", "Hello.", "hi", "once more"]


async def test_may_wait_is_true_only_while_an_interrupt_waits(database_url: str, tmp_path: Path):
    class State(TypedDict):
        answer: str

    def ask(state: State) -> State:
        return {"answer": interrupt("Which colour?")}

    async with storage_for(database_url, tmp_path) as storage:
        saver = storage.checkpointer
        graph = StateGraph(State).add_node(ask).add_edge(START, "ask").compile(checkpointer=saver)
        config = thread("asking")
        thread_id = config["configurable"]["thread_id"]
        before = await saver.may_wait(thread_id)
        await graph.ainvoke({"answer": ""}, config, durability="sync")
        waiting = await saver.may_wait(thread_id)
        done = await graph.ainvoke(Command(resume="blue"), config, durability="sync")
        after = await saver.may_wait(thread_id)

    assert (before, waiting, after) == (False, True, False)
    assert done["answer"] == "blue"


async def test_a_checkpoint_may_wait_read_serves_the_next_read_of_its_task_only(
    database_url: str, tmp_path: Path
):
    class State(TypedDict):
        count: int

    def add(state: State) -> State:
        return {"count": state["count"] + 1}

    async with storage_for(database_url, tmp_path) as storage:
        saver = storage.checkpointer
        graph = StateGraph(State).add_node(add).add_edge(START, "add").compile(checkpointer=saver)
        config = thread("peeked")
        thread_id = config["configurable"]["thread_id"]
        await graph.ainvoke({"count": 0}, config, durability="sync")

        assert not await saver.may_wait(thread_id)
        # another task runs meanwhile: it reads the database, not this task's read
        await asyncio.create_task(graph.ainvoke({"count": 10}, config, durability="sync"))
        kept = await saver.aget_tuple(config)  # this task's next read: the one may_wait made
        again = await saver.aget_tuple(config)  # served once only
        await saver.may_wait(thread_id)
        await asyncio.create_task(graph.ainvoke({"count": 20}, config, durability="sync"))
        saver.forget(thread_id)  # no run followed: dropped
        fresh = await saver.aget_tuple(config)

    assert kept.checkpoint["channel_values"]["count"] == 1
    assert again.checkpoint["channel_values"]["count"] == 11
    assert fresh.checkpoint["channel_values"]["count"] == 21
    assert saver._peeked == {}


@tool
async def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
async def quick() -> str:
    """Answer at once."""
    return "quick done"


async def test_every_message_of_a_turn_resumed_twice_is_archived(database_url: str, tmp_path: Path):
    model = ScriptedChatModel(
        steps=[
            call_tools(("delete", {"path": "a.txt"}), ("quick", {}), ("delete", {"path": "b.txt"})),
            "Done.",
        ]
    )
    async with storage_for(database_url, tmp_path) as storage:
        settings = load_settings(sensitive_patterns="delete")
        runtime = Orchestrator.create(settings, model=model, tools=[delete, quick], storage=storage)
        session = runtime.session(user_id="u-archive")
        first = await session.run("clean up")
        by_path = {q.question["action"]["args"]["path"]: q.id for q in first.questions}
        second = await session.answer({by_path["b.txt"]: {"type": "approve"}})
        [again] = second.questions
        third = await session.answer({again.id: {"type": "approve"}})
        history = await session.history()
        async with storage.database.admin_transaction() as connection:
            archived = set(
                await connection.scalars(
                    text("SELECT message_id FROM messages WHERE session_id = :id"),
                    {"id": session.session_id},
                )
            )

    assert third.answer == "Done."
    assert {m.id for m in history} == archived


async def test_langgraphs_own_saver_reads_the_writes_and_blobs_ours_serializes_in_the_loop(
    database_url: str, tmp_path: Path
):
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.base import empty_checkpoint

    async with storage_for(database_url, tmp_path) as storage:
        ours = storage.checkpointer
        thread = f"inline-{uuid.uuid4().hex[:8]}"
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [AIMessage("kept", id="m1")], "iterations": 2}
        checkpoint["channel_versions"] = versions = {"messages": "1", "iterations": "1"}
        config = await ours.aput(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            checkpoint,
            {"source": "loop", "step": 1},
            versions,
        )
        await ours.aput_writes(config, [("messages", [AIMessage("pending", id="m2")])], task_id="t1")
        await ours.aput_writes(config, [(INTERRUPT, {"question": "go?"})], task_id="t2")
        stock = await AsyncPostgresSaver(ours.conn).aget_tuple(config)

    assert stock is not None
    assert [m.text for m in stock.checkpoint["channel_values"]["messages"]] == ["kept"]
    assert stock.checkpoint["channel_values"]["iterations"] == 2
    assert stock.metadata["step"] == 1
    assert [(task, channel) for task, channel, _ in stock.pending_writes] == [("t1", "messages"), ("t2", INTERRUPT)]
    assert stock.pending_writes[1][2] == {"question": "go?"}


async def test_a_turn_reads_back_what_it_wrote_without_deserializing_and_sees_another_process_write(
    database_url: str, tmp_path: Path, monkeypatch
):
    async with storage_for(database_url, tmp_path) as storage, storage_for(
        database_url, tmp_path / "other"
    ) as other:
        ours = storage.checkpointer
        assert isinstance(ours, PooledPostgresSaver)
        model = ScriptedChatModel(steps=["Hello.", "From the other process.", "Again."])
        runtime = Orchestrator.create(load_settings(), model=model, storage=storage)
        session = runtime.session(user_id="u-written")
        await session.run("hi")
        config = {"configurable": {"thread_id": session.session_id, "checkpoint_ns": ""}}

        loaded: list[str] = []
        loads = ours.serde.loads_typed
        monkeypatch.setattr(
            ours.serde, "loads_typed", lambda data: loaded.append(data[0]) or loads(data)
        )
        mine = await ours.aget_tuple(config)
        assert loaded == [], "the messages this process wrote are not deserialized again"

        elsewhere = Orchestrator.create(load_settings(), model=model, storage=other)
        await elsewhere.session(user_id="u-written", session_id=session.session_id).run("there?")
        theirs = await ours.aget_tuple(config)
        again = await session.run("and now?")

    assert [m.text for m in mine.checkpoint["channel_values"]["messages"]] == ["hi", "Hello."]
    assert loaded, "another process's write is read from the database"
    assert [m.text for m in theirs.checkpoint["channel_values"]["messages"]][-1] == (
        "From the other process."
    )
    assert again.answer == "Again."
