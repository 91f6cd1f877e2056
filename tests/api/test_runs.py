"""The official `langgraph-sdk` client, unmodified, against `orchestrator serve`: threads, runs
streamed and waited for, a paused sensitive call resumed, state, history and the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph_sdk.schema import Command

from orchestrator.testing.scripted import call_tools
from tests.api.served import served
from tests.dispatch.test_background import slow_tools
from tests.helpers import tool_json

pytestmark = pytest.mark.usefixtures("database_logins")
KEYS = {"key-ann": "ann", "key-bob": "bob"}
HUMAN = {"messages": [{"role": "user", "content": "hello"}]}


@tool
async def echo(text: str) -> str:
    """Repeat the text."""
    return f"echo: {text}"


def answer_with_result(messages: list[BaseMessage]) -> str:
    return f"done ({tool_json(messages[-1].text)['message']})"


async def test_a_streamed_run_with_a_tool_call_and_the_thread_it_leaves(database_logins, tmp_path: Path, scripted):
    model = scripted(call_tools(("echo", {"text": "hi"})), answer_with_result)
    async with served(database_logins, tmp_path, model, tools=[echo], keys=KEYS) as server:
        client = server.client("key-ann")
        thread = await client.threads.create(metadata={"topic": "greeting"})
        events = [
            part
            async for part in client.runs.stream(
                thread["thread_id"],
                "orchestrator",
                input={"messages": [{"role": "user", "content": "say hi"}]},
                stream_mode=["values", "updates", "custom"],
            )
        ]
        state = await client.threads.get_state(thread["thread_id"])
        history = await client.threads.get_history(thread["thread_id"], limit=50)
        found = await client.threads.search(metadata={"topic": "greeting"})

    kinds = [part.event for part in events]
    assert kinds[0] == "metadata" and kinds[-1] == "end"
    assert {"values", "updates", "custom"} <= set(kinds)
    tool_events = [p.data for p in events if p.event == "custom" and p.data.get("kind") == "tool"]
    assert {e["tool"] for e in tool_events} == {"echo"}
    (result,) = [p.data for p in events if p.event == "custom" and p.data.get("kind") == "turn_result"]
    assert result["answer"] == "done (echo: hi)"
    last_values = [p.data for p in events if p.event == "values"][-1]
    assert last_values["messages"][-1]["content"] == "done (echo: hi)"
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert state["next"] == []
    assert len(history) >= 3 and history[0]["values"] == state["values"]
    assert [t["thread_id"] for t in found] == [thread["thread_id"]]


async def test_a_run_waited_for_answers_with_the_thread_values(database_logins, tmp_path: Path, scripted):
    model = scripted("hello there")
    async with served(database_logins, tmp_path, model, keys=KEYS) as server:
        client = server.client("key-ann")
        thread = await client.threads.create()
        values = await client.runs.wait(
            thread["thread_id"], "orchestrator", input={"messages": [{"role": "user", "content": "hi"}]}
        )
        runs = await client.runs.list(thread["thread_id"])

    assert values["messages"][-1]["content"] == "hello there"
    assert [run["status"] for run in runs] == ["success"]


async def test_a_paused_sensitive_call_is_resumed_with_a_command(database_logins, tmp_path: Path, scripted):
    deleted: list[str] = []

    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), answer_with_result)
    async with served(database_logins, tmp_path, model, tools=[files_delete], keys=KEYS) as server:
        client = server.client("key-ann")
        thread = await client.threads.create()
        paused = await client.runs.wait(
            thread["thread_id"], "orchestrator", input={"messages": [{"role": "user", "content": "clean"}]}
        )
        (interrupt,) = paused["__interrupt__"]
        assert interrupt["value"]["action"]["name"] == "files_delete" and deleted == []
        waiting = await client.threads.get(thread["thread_id"])
        resumed = await client.runs.wait(
            thread["thread_id"], "orchestrator", command=Command(resume={"type": "approve"})
        )

    assert waiting["status"] == "interrupted"
    assert deleted == ["a.txt"]
    assert resumed["messages"][-1]["content"] == "done (deleted a.txt)"
    assert "__interrupt__" not in resumed



async def test_a_background_jobs_follow_up_that_paused_the_thread_refuses_a_message_with_409(
    database_logins, tmp_path: Path, scripted
):
    deleted: list[str] = []

    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    gate = asyncio.Event()
    model = scripted(
        call_tools(("slow_work", {})),
        "Started.",
        call_tools(("files_delete", {"path": "b.txt"})),  # the follow-up turn asks first
        answer_with_result,
    )
    tools = [*slow_tools(gate, background=True), files_delete]
    async with served(database_logins, tmp_path, model, tools=tools, keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        started = await client.runs.wait(thread_id, "orchestrator", input=HUMAN)
        gate.set()
        await server.state.assistants.named("orchestrator").runtime.jobs.drain()
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        resumed = await client.runs.wait(thread_id, "orchestrator", command=Command(resume={"type": "approve"}))

    assert started["messages"][-1]["content"] == "Started."
    assert refused.value.response.status_code == 409
    assert "waits for answers to 1 question" in refused.value.response.json()["detail"]
    assert deleted == ["b.txt"]
    assert resumed["messages"][-1]["content"] == "done (deleted b.txt)"

async def test_the_store_search_finds_the_users_own_messages_only(database_logins, tmp_path: Path, scripted):
    model = scripted("noted", "noted too")
    async with served(database_logins, tmp_path, model, keys=KEYS) as server:
        ann, bob = server.client("key-ann"), server.client("key-bob")
        for client, text in ((ann, "my parrot is called Kiwi"), (bob, "my parrot is called Mango")):
            thread = await client.threads.create()
            await client.runs.wait(
                thread["thread_id"], "orchestrator", input={"messages": [{"role": "user", "content": text}]}
            )
        found = await ann.store.search_items(["memory"], query="parrot")

    contents = [item["value"]["content"] for item in found["items"]]
    assert "my parrot is called Kiwi" in contents
    assert not any("Mango" in text for text in contents)


async def test_with_agents_each_agent_folder_is_an_assistant_and_a_thread_keeps_its_own(
    database_logins, tmp_path: Path, scripted
):
    from tests.tool_folders import parrot_agent

    parrot_agent(tmp_path / "sub_graphs")
    model = scripted("the parrot speaks")
    async with served(database_logins, tmp_path, model, keys=KEYS, sub_graphs=tmp_path / "sub_graphs") as server:
        client = server.client("key-ann")
        assistants = await client.assistants.search()
        thread_id = (await client.threads.create())["thread_id"]
        values = await client.runs.wait(thread_id, "parrot", input={"messages": [{"role": "user", "content": "hi"}]})
        with pytest.raises(httpx.HTTPStatusError) as other:
            await client.runs.wait(thread_id, "orchestrator", input={"messages": [{"role": "user", "content": "hi"}]})
        thread = await client.threads.get(thread_id)

    assert [a["graph_id"] for a in assistants] == ["orchestrator", "parrot"]
    assert values["messages"][-1]["content"] == "the parrot speaks"
    assert "You are parrot" in model.received[0][0].text  # the parrot's own instructions
    assert other.value.response.status_code == 409
    assert other.value.response.json()["detail"] == f"thread {thread_id} belongs to assistant parrot"
    assert thread["metadata"]["graph_id"] == "parrot"


async def test_a_deleted_thread_takes_its_messages_runs_and_checkpoints_with_it(database_logins, tmp_path: Path, scripted):
    model = scripted("kept for now")
    async with served(database_logins, tmp_path, model, keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        await client.runs.wait(thread_id, "orchestrator", input={"messages": [{"role": "user", "content": "hi"}]})
        await client.threads.delete(thread_id)
        refused = []
        for attempt in (
            client.threads.get(thread_id),
            client.runs.list(thread_id),
            client.runs.wait(thread_id, "orchestrator", input={"messages": [{"role": "user", "content": "again"}]}),
        ):
            with pytest.raises(httpx.HTTPStatusError) as gone:
                await attempt
            refused.append(gone.value.response.status_code)
        checkpoint = await server.state.storage.checkpointer.aget_tuple({"configurable": {"thread_id": thread_id}})
        found = await server.state.storage.messages.search_messages("hi", "ann", session_id=thread_id)

    assert refused == [404, 404, 404]
    assert checkpoint is None and found == []
