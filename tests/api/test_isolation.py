"""Two users' keys on one server: neither reads, lists, runs, resumes or cancels the other's
threads, runs or memory; every such request is 404 (never 403: existence is not told), and a
request without a valid key is 401 and writes nothing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langchain_core.tools import tool
from langgraph_sdk.schema import Command
from sqlalchemy import text

from orchestrator.store.engine import Database
from orchestrator.testing.scripted import call_tools
from tests.api.served import served

KEYS = {"key-ann": "ann", "key-bob": "bob"}
HUMAN = {"messages": [{"role": "user", "content": "hello"}]}


def status_of(error: BaseException) -> int:
    assert isinstance(error, httpx.HTTPStatusError), error
    return error.response.status_code


async def test_another_users_thread_and_runs_are_not_found_by_any_endpoint(database_logins, tmp_path: Path, scripted):
    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    model = scripted(call_tools(("files_delete", {"path": "a.txt"})))
    async with served(database_logins, tmp_path, model, tools=[files_delete], keys=KEYS) as server:
        ann, bob = server.client("key-ann"), server.client("key-bob")
        thread = await ann.threads.create(metadata={"owner": "ann"})
        thread_id = thread["thread_id"]
        paused = await ann.runs.wait(thread_id, "orchestrator", input=HUMAN)
        assert paused["__interrupt__"]
        (run,) = await ann.runs.list(thread_id)
        run_id = run["run_id"]

        attempts = {
            "get": bob.threads.get(thread_id),
            "state": bob.threads.get_state(thread_id),
            "history": bob.threads.get_history(thread_id),
            "update": bob.threads.update(thread_id, metadata={"owner": "bob"}),
            "delete": bob.threads.delete(thread_id),
            "run": bob.runs.create(thread_id, "orchestrator", input=HUMAN),
            "wait": bob.runs.wait(thread_id, "orchestrator", input=HUMAN),
            "resume": bob.runs.wait(thread_id, "orchestrator", command=Command(resume={"type": "approve"})),
            "runs": bob.runs.list(thread_id),
            "run get": bob.runs.get(thread_id, run_id),
            "join": bob.runs.join(thread_id, run_id),
            "cancel": bob.runs.cancel(thread_id, run_id),
        }
        refused = {}
        for name, attempt in attempts.items():
            try:
                await attempt
            except httpx.HTTPStatusError as error:
                refused[name] = status_of(error)
            else:
                refused[name] = 200
        streamed = []
        try:
            async for part in bob.runs.stream(thread_id, "orchestrator", input=HUMAN):
                streamed.append(part)
        except httpx.HTTPStatusError as error:
            refused["stream"] = status_of(error)
        listed = await bob.threads.search()
        still = await ann.threads.get_state(thread_id)
        mine = await ann.threads.get(thread_id)

    assert refused == dict.fromkeys([*attempts, "stream"], 404)
    assert streamed == [] and listed == []
    assert still["interrupts"] and mine["metadata"]["owner"] == "ann"


@pytest.mark.parametrize("key", [None, "not-a-key", "KEY-ANN"])
async def test_a_request_without_a_valid_key_is_401_and_writes_nothing(
    database_logins, tmp_path: Path, scripted, key: str | None, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("LANGGRAPH_API_KEY", raising=False)
    monkeypatch.delenv("LANGSMITH_API_KEY", raising=False)
    monkeypatch.delenv("LANGCHAIN_API_KEY", raising=False)
    async with served(database_logins, tmp_path, scripted(), keys=KEYS) as server:
        client = server.client(key)
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await client.threads.create(metadata={"by": "intruder"})
        async with httpx.AsyncClient(base_url=server.url) as raw:
            open_paths = [(await raw.get(path)).status_code for path in ("/ok", "/ready", "/info")]
            listed = await raw.post("/threads/search", json={})
    database = Database(database_logins.owner_url, app_url=database_logins.app_url)
    try:
        async with database.admin_transaction() as connection:
            written = (await connection.execute(text("SELECT count(*) FROM sessions WHERE metadata ? 'by'"))).scalar()
    finally:
        await database.close()

    assert status_of(refused.value) == 401
    assert refused.value.response.headers["www-authenticate"] == "Bearer"
    assert listed.status_code == 401 and "key" in listed.json()["detail"]
    assert open_paths == [200, 200, 200]
    assert written == 0
