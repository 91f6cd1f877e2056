"""Runs under the client's control: one at a time per thread, cancelled, joined, re-streamed from
an event id, each stream mode, and what a malformed run is told."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from orchestrator.testing.scripted import call_tools
from tests.api.served import blocking_tool, served

KEYS = {"key-ann": "ann"}
HUMAN = {"messages": [{"role": "user", "content": "hello"}]}


async def test_a_busy_thread_refuses_a_second_run_and_a_cancelled_run_leaves_it_usable(
    database_logins, tmp_path: Path, scripted
):
    wait_here, started, _ = blocking_tool()
    model = scripted(call_tools(("wait_here", {"note": "x"})), "after the cancel")
    async with served(database_logins, tmp_path, model, tools=[wait_here], keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        await started.wait()
        with pytest.raises(httpx.HTTPStatusError) as busy:
            await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        busy_status = (await client.threads.get(thread_id))["status"]
        await client.runs.cancel(thread_id, run["run_id"], wait=True)
        cancelled = await client.runs.get(thread_id, run["run_id"])
        state = await client.threads.get_state(thread_id)
        again = await client.runs.wait(thread_id, "orchestrator", input=HUMAN)

    assert busy.value.response.status_code == 409
    assert busy_status == "busy"
    assert cancelled["status"] == "interrupted"
    assert state["next"] == []  # the cancelled turn's call answered, the turn ended
    assert again["messages"][-1]["content"] == "after the cancel"


async def test_a_run_is_joined_and_streamed_again_from_an_event_id(database_logins, tmp_path: Path, scripted):
    wait_here, started, release = blocking_tool()
    model = scripted(call_tools(("wait_here", {"note": "y"})), "all done")
    async with served(database_logins, tmp_path, model, tools=[wait_here], keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "orchestrator", input=HUMAN, stream_mode=["values", "custom"])
        await started.wait()
        joined = asyncio.ensure_future(client.runs.join(thread_id, run["run_id"]))
        release.set()
        values = await joined
        whole = [p async for p in client.runs.join_stream(thread_id, run["run_id"])]
        later = [p async for p in client.runs.join_stream(thread_id, run["run_id"], last_event_id="2")]

    assert values["messages"][-1]["content"] == "all done"
    assert whole[0].event == "metadata" and whole[-1].event == "end"
    assert later == whole[3:]


async def test_each_stream_mode(database_logins, tmp_path: Path, scripted):
    model = scripted("first reply", "second reply", "third reply")
    async with served(database_logins, tmp_path, model, keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        streamed = {}
        for mode in ("messages-tuple", "messages", "events"):
            streamed[mode] = [p async for p in client.runs.stream(thread_id, "orchestrator", input=HUMAN, stream_mode=mode)]

    tuples = [p.data for p in streamed["messages-tuple"] if p.event == "messages"]
    assert "".join(chunk["content"] for chunk, _ in tuples) == "first reply"
    assert all(meta["langgraph_node"] == "model" for _, meta in tuples)
    partial = [p.data for p in streamed["messages"] if p.event == "messages/partial"]
    complete = [p.data for p in streamed["messages"] if p.event == "messages/complete"]
    assert all(reply[0]["content"] for reply in partial)  # none from a model that does not stream
    assert [reply[0]["content"] for reply in complete] == ["second reply"]
    tokens = [p.data for p in streamed["events"] if p.event == "events" and p.data["event"] == "on_chat_model_stream"]
    assert "".join(t["data"]["chunk"]["content"] for t in tokens) == "third reply"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"input": {"messages": []}}, "exactly one user message"),
        ({"input": {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}}, "exactly one"),
        ({"input": HUMAN, "interrupt_before": ["tools"]}, "interrupt_before is not supported"),
        ({"input": HUMAN, "stream_mode": "debug"}, "stream_mode"),
        ({"input": HUMAN, "command": {"resume": "yes"}}, "not both"),
        ({"command": {"resume": {"type": "approve"}}}, "nothing in this thread waits"),
    ],
)
async def test_a_malformed_run_is_422_or_409_and_says_why(database_logins, tmp_path: Path, scripted, body, said):
    async with (
        served(database_logins, tmp_path, scripted(), keys=KEYS) as server,
        httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw,
    ):
        thread_id = (await raw.post("/threads", json={})).json()["thread_id"]
        refused = await raw.post(f"/threads/{thread_id}/runs", json={"assistant_id": "orchestrator", **body})
        runs = (await raw.get(f"/threads/{thread_id}/runs")).json()
        unknown = await raw.post(f"/threads/{thread_id}/runs", json={"assistant_id": "nobody", "input": HUMAN})

    assert refused.status_code in (409, 422) and said in refused.json()["detail"], refused.text
    assert runs == []
    assert unknown.status_code == 404


async def test_a_body_over_a_megabyte_is_413_and_a_body_not_json_is_422(database_logins, tmp_path: Path, scripted):
    async with (
        served(database_logins, tmp_path, scripted(), keys=KEYS) as server,
        httpx.AsyncClient(base_url=server.url, headers={"x-api-key": "key-ann"}) as raw,
    ):
        huge = await raw.post("/threads", json={"metadata": {"blob": "x" * 1_000_001}})
        garbled = await raw.post("/threads", content=b"{not json", headers={"content-type": "application/json"})
        listed = (await raw.post("/threads/search", json={})).json()

    assert huge.status_code == 413 and "1000000 bytes" in huge.json()["detail"]
    assert garbled.status_code == 422 and "not JSON" in garbled.json()["detail"]
    assert not any("blob" in thread["metadata"] for thread in listed)


async def test_two_runs_asked_at_once_of_one_thread_start_one(database_logins, tmp_path: Path, scripted):
    wait_here, started, release = blocking_tool()
    model = scripted(call_tools(("wait_here", {"note": "w"})), "one answer")
    async with served(database_logins, tmp_path, model, tools=[wait_here], keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        asked = [client.runs.create(thread_id, "orchestrator", input=HUMAN) for _ in range(4)]
        outcomes = await asyncio.gather(*asked, return_exceptions=True)
        await started.wait()
        release.set()
        (run,) = [o for o in outcomes if isinstance(o, dict)]
        await client.runs.join(thread_id, run["run_id"])
        runs = await client.runs.list(thread_id)

    refused = [o for o in outcomes if not isinstance(o, dict)]
    assert [e.response.status_code for e in refused] == [409, 409, 409]
    assert [r["run_id"] for r in runs] == [run["run_id"]]


async def test_enqueue_runs_after_the_current_run_and_interrupt_cancels_it_first(database_logins, tmp_path: Path, scripted):
    wait_here, started, release = blocking_tool()
    second = {"messages": [{"role": "user", "content": "second"}]}
    model = scripted(call_tools(("wait_here", {"note": "a"})), "first answered", "second answered", call_tools(("wait_here", {"note": "b"})), "fourth answered")
    async with served(database_logins, tmp_path, model, tools=[wait_here], keys=KEYS) as server:
        client = server.client("key-ann")
        thread_id = (await client.threads.create())["thread_id"]
        first = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        await started.wait()
        queued = await client.runs.create(thread_id, "orchestrator", input=second, multitask_strategy="enqueue")
        waiting = await client.runs.get(thread_id, queued["run_id"])
        release.set()
        after = await client.runs.join(thread_id, queued["run_id"])
        statuses = [(await client.runs.get(thread_id, r["run_id"]))["status"] for r in (first, queued)]

        started.clear()
        release.clear()
        third = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
        await started.wait()
        fourth = await client.runs.wait(thread_id, "orchestrator", input=second, multitask_strategy="interrupt")
        cancelled = await client.runs.get(thread_id, third["run_id"])

    assert (queued["multitask_strategy"], waiting["multitask_strategy"]) == ("enqueue", "enqueue")
    assert waiting["status"] == "pending", "it waits for the run ahead of it"
    assert statuses == ["success", "success"]
    assert [m["content"] for m in after["messages"] if m["type"] == "ai"][-2:] == ["first answered", "second answered"]
    assert cancelled["status"] == "interrupted"
    assert fourth["messages"][-1]["content"] == "fourth answered"
