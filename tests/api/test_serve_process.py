"""`orchestrator serve` as people run it: a process of its own, keys from `orchestrator users`,
the official SDK as its client; killed mid-run, and started again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.schema import Command

from orchestrator.store.logins import Logins
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import Endless, JsonObject, Reply
from tests.helpers import cli_env, run_cli, run_cli_process, server_env
from tests.tool_folders import write_folder

pytestmark = pytest.mark.process
ECHO = {"description": "Repeats.", "version": "1.0"}
HUMAN = {"messages": [{"role": "user", "content": "what is the answer?"}]}


class GatedModel(OpenAICompatibleServer):
    """The scripted model server, telling the test when each request has come."""

    def __init__(self, replies: list[Reply]) -> None:
        super().__init__(replies)
        self.asked = [threading.Event() for _ in replies]

    def next_reply(self, request: JsonObject) -> Reply | None:
        reply = super().next_reply(request)
        self.asked[len(self.requests) - 1].set()
        return reply


def environment(home: Path, logins: Logins, model: OpenAICompatibleServer) -> dict[str, str]:
    return {
        **cli_env(home),
        "DATABASE_URL": logins.owner_url,
        "DATABASE_APP_URL": logins.app_url,
        "ORCHESTRATOR_EMBEDDINGS": "none",
        **server_env(model),
    }


@contextmanager
def serving(
    home: Path, env: dict[str, str], *args: str
) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """`orchestrator serve --port 0` until the block ends: the process, its URL, its first lines."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "serve", "--port", "0", *args],
        cwd=home, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    lines: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("serving "):
                break
        assert lines and lines[-1].startswith("serving "), "".join(lines)
        url = lines[-1].split(" at ", 1)[1].split()[0]
        yield process, url, lines
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)


def key_for(user: str, home: Path, env: dict[str, str]) -> str:
    assert run_cli("users", "add", user, cwd=home, env=env).returncode == 0
    made = run_cli("users", "key", user, cwd=home, env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


async def test_the_sdk_streams_waits_resumes_and_reads_against_a_serve_process(database_logins, tmp_path: Path):
    root = tmp_path / "sub_graphs"
    write_folder(root, "echo")
    write_folder(root, "guarded", config={**ECHO, "name": "guarded", "requires_approval": True})
    replies: list[Reply] = [
        [("echo_say", {"text": "hi"})], "said hi", [("guarded_say", {"text": "bye"})], "said bye",
    ]
    with OpenAICompatibleServer(replies) as model:
        env = environment(tmp_path, database_logins, model)
        for folder in ("echo", "guarded"):
            # In a process of its own: the approvals are signed with this installation's key, as
            # the server's process reads it.
            assert run_cli_process("tools", "approve", folder, cwd=tmp_path, env=env).returncode == 0
        key = key_for("cat", tmp_path, env)
        with serving(tmp_path, env) as (_, url, _):
            client = get_client(url=url, api_key=key)
            thread_id = (await client.threads.create())["thread_id"]
            streamed = [
                part async for part in client.runs.stream(
                    thread_id, "orchestrator", input={"messages": [{"role": "user", "content": "say hi"}]},
                    stream_mode=["values", "custom"],
                )
            ]
            paused = await client.runs.wait(
                thread_id, "orchestrator", input={"messages": [{"role": "user", "content": "now bye"}]}
            )
            resumed = await client.runs.wait(thread_id, "orchestrator", command=Command(resume={"type": "approve"}))
            state = await client.threads.get_state(thread_id)
            history = await client.threads.get_history(thread_id, limit=100)
            found = await client.store.search_items(["memory"], query="bye")

    tools = {p.data["tool"] for p in streamed if p.event == "custom" and p.data.get("kind") == "tool"}
    assert tools == {"echo_say"}
    assert [p for p in streamed if p.event == "values"][-1].data["messages"][-1]["content"] == "said hi"
    (question,) = paused["__interrupt__"]
    assert question["value"]["action"] == {"name": "guarded_say", "args": {"text": "bye"}, "description": question["value"]["action"]["description"]}
    assert resumed["messages"][-1]["content"] == "said bye"
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"] * 2
    assert history[0]["values"] == state["values"] and len(history) > 4
    assert "now bye" in [item["value"]["content"] for item in found["items"]]


async def test_a_server_killed_mid_run_resumes_the_run_at_its_next_start(database_logins, tmp_path: Path):
    with GatedModel([Endless(text=""), "forty-two"]) as model:
        env = environment(tmp_path, database_logins, model)
        key = key_for("ann", tmp_path, env)
        with serving(tmp_path, env) as (process, url, _):
            client = get_client(url=url, api_key=key)
            thread_id = (await client.threads.create())["thread_id"]
            run = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
            assert await asyncio.to_thread(model.asked[0].wait, 60)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
        with serving(tmp_path, env) as (_, url, lines):
            client = get_client(url=url, api_key=key)
            values = await client.runs.join(thread_id, run["run_id"])
            ended = await client.runs.get(thread_id, run["run_id"])

    assert any(f"run {run['run_id']} of thread {thread_id}: resumed" in line for line in lines), lines
    assert [m["content"] for m in values["messages"]] == ["what is the answer?", "forty-two"]
    assert ended["status"] == "success"


async def test_a_revoked_key_is_refused_from_the_next_request(database_logins, tmp_path: Path):
    with OpenAICompatibleServer(["hello"]) as model:
        env = environment(tmp_path, database_logins, model)
        key = key_for("bob", tmp_path, env)
        with serving(tmp_path, env) as (_, url, _):
            client = get_client(url=url, api_key=key)
            thread_id = (await client.threads.create())["thread_id"]
            answered = await client.runs.wait(thread_id, "orchestrator", input=HUMAN)
            assert run_cli("users", "revoke", "bob", cwd=tmp_path, env=env).returncode == 0
            with pytest.raises(httpx.HTTPStatusError) as refused:
                await client.threads.get(thread_id)

    assert answered["messages"][-1]["content"] == "hello"
    assert refused.value.response.status_code == 401


async def test_beyond_this_machine_without_a_certificate_it_says_so_and_still_asks_keys(database_logins, tmp_path: Path):
    with OpenAICompatibleServer([]) as model:
        env = environment(tmp_path, database_logins, model)
        with serving(tmp_path, env, "--host", "0.0.0.0") as (_, url, lines):
            port = url.rsplit(":", 1)[1]
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as raw:
                refused = await raw.post("/threads", json={})

    assert any("listening on 0.0.0.0" in line and "clear text" in line for line in lines), lines
    assert refused.status_code == 401


def line_with(process: subprocess.Popen[str], text: str) -> str:
    """The first line of the process's standard error holding `text` (its end: what it read)."""
    assert process.stderr is not None
    lines: list[str] = []
    for line in process.stderr:
        if text in line:
            return line
        lines.append(line)
    return "".join(lines)


class HeldModel(GatedModel):
    """A model server whose first answer waits until the test releases it."""

    def __init__(self, replies: list[Reply]) -> None:
        super().__init__(replies)
        self.release = threading.Event()

    def next_reply(self, request: JsonObject) -> Reply | None:
        reply = super().next_reply(request)
        if len(self.requests) == 1:
            self.release.wait(60)
        return reply


async def test_sigterm_lets_a_turn_finish_within_grace_and_stops_one_past_it(database_logins, tmp_path: Path):
    with HeldModel(["finished in time"]) as model:
        env = environment(tmp_path, database_logins, model)
        key = key_for("gus", tmp_path, env)
        with serving(tmp_path, env, "--grace", "60") as (process, url, _):
            client = get_client(url=url, api_key=key)
            thread_id = (await client.threads.create())["thread_id"]
            finished = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
            assert await asyncio.to_thread(model.asked[0].wait, 60)
            process.send_signal(signal.SIGTERM)
            stopping = await asyncio.to_thread(line_with, process, "stopping: 1 run(s) get up to 60 s")
            async with httpx.AsyncClient(base_url=url) as http:  # draining: no new run, not ready
                ready = await http.get("/ready")
                refused = await http.post(
                    f"/threads/{thread_id}/runs", json={"assistant_id": "orchestrator", "input": HUMAN},
                    headers={"x-api-key": key},
                )
            model.release.set()
            _, drained = process.communicate(timeout=60)
            codes = [process.returncode]

    with GatedModel([Endless(text="")]) as model:
        env = environment(tmp_path, database_logins, model)
        with serving(tmp_path, env, "--grace", "1") as (process, url, _):
            client = get_client(url=url, api_key=key)
            stopped = await client.runs.create(thread_id, "orchestrator", input=HUMAN)
            assert await asyncio.to_thread(model.asked[0].wait, 60)
            process.send_signal(signal.SIGTERM)
            _, cut = process.communicate(timeout=60)
            codes.append(process.returncode)
        with serving(tmp_path, env) as (_, url, _):
            client = get_client(url=url, api_key=key)
            runs = {run["run_id"]: run["status"] for run in await client.runs.list(thread_id)}
            state = await client.threads.get_state(thread_id)

    assert "stopping" in stopping, stopping
    assert ready.status_code == 503 and refused.status_code == 503
    assert codes == [0, 0], "a process manager's stop is a success"
    assert "after the grace time" not in drained, drained
    assert "stopped 1 run(s) still running after the grace time" in cut, cut
    assert runs == {finished["run_id"]: "success", stopped["run_id"]: "interrupted"}
    assert [m["type"] for m in state["values"]["messages"]][:2] == ["human", "ai"]
    assert state["values"]["messages"][1]["content"] == "finished in time"
