"""Asynchronous execution: the next turn during a background task, and many sessions at once.

    .venv/bin/python scripts/bench_async.py [--sessions 50] [--turns 10] [--repeats 10]

Runs on the embedded PostgreSQL (durable checkpoints, message archive, request
log: the product as `orchestrator chat` runs it) with a zero-latency model.

- next_turn_ratio: a turn starts a 2 s background tool and the user's next
  turn is sent at once; that next turn's time to answer / the same turn in a
  session with no task running anywhere (each round waits for its job to
  end). The two alternate, which goes first alternating too; median of
  `--repeats` paired ratios. 1.0: a running task costs the next turn nothing.
  Beside it the medians themselves: next_turn_overhead_ms (the turn during
  the task), idle_turn_ms, next_turn_vs_idle_ms (their difference) and
  background_start_turn_ms (the turn that starts the task).
- turns_per_s, lost, crossed: `--sessions` sessions run `--turns` turns each,
  all at once, every turn a tool call. Afterwards every session's history (in
  the checkpoints and in the message archive) is checked: messages missing
  (lost) or carrying another session's marker (crossed).

Last line, one JSON object of these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel
from sqlalchemy import text

from orchestrator.folders.tool_config import ToolConfig
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import Storage
from orchestrator.tools import Tool, ToolRequest, ToolResult, action

BACKGROUND_SECONDS = 2.0
MARKER = re.compile(r"<(s\d+)>")


class EchoModel(BaseChatModel):
    """Zero latency: `start the job` calls `job_run`; other user text calls `echo`; results are echoed."""

    @property
    def _llm_type(self) -> str:
        return "echo"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            name, args = ("job_run", {}) if last.text == "start the job" else ("echo", {"text": last.text})
            reply = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{time.time_ns()}"}])
        elif isinstance(last, ToolMessage):
            reply = AIMessage(content=f"done: {json.loads(last.text).get('message', '')}")
        else:
            reply = AIMessage(content="noted")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
async def echo(text: str) -> str:
    """Repeat the text."""
    return text


class Nothing(BaseModel):
    pass


class Job(Tool):
    name: str = "job"
    description: str = "A long job."

    @action(Nothing)
    async def run(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Run the job."""
        await asyncio.sleep(BACKGROUND_SECONDS)
        return request.result("the job is done")


def job_tools() -> list[BaseTool]:
    config = ToolConfig(name="job", description="x", version="1", background=True)
    return langchain_tools(Job(), config=config)


async def timed(work: Any) -> float:
    started = time.perf_counter()
    await work
    return (time.perf_counter() - started) * 1000


async def next_turn(settings: Settings, storage: Storage, repeats: int) -> dict[str, float]:
    runtime = Orchestrator.create(settings, model=EchoModel(), tools=[echo, *job_tools()], storage=storage)
    busy, idle, started = [], [], []

    async def idle_turn(round_number: int) -> None:
        quiet = runtime.session(user_id="bench", session_id=f"idle-{round_number}")
        await quiet.run("warm up")
        idle.append(await timed(quiet.run("what is new?")))

    async def busy_turn(round_number: int) -> None:
        session = runtime.session(user_id="bench", session_id=f"busy-{round_number}")
        await session.run("warm up")
        started.append(await timed(session.run("start the job")))
        busy.append(await timed(session.run("what is new?")))  # the job is still running
        assert any(t.status == "running" for t in runtime.jobs.of_session(session.session_id))
        await runtime.jobs.drain()  # so that no job runs during the next idle turn

    for round_number in range(repeats):
        pair = (idle_turn, busy_turn) if round_number % 2 == 0 else (busy_turn, idle_turn)
        for turn in pair:
            await turn(round_number)
    ratios = [b / i for b, i in zip(busy, idle, strict=True)]
    return {
        "next_turn_ratio": round(statistics.median(ratios), 3),
        "next_turn_overhead_ms": round(statistics.median(busy), 2),
        "idle_turn_ms": round(statistics.median(idle), 2),
        "next_turn_vs_idle_ms": round(statistics.median(busy) - statistics.median(idle), 2),
        "background_start_turn_ms": round(statistics.median(started), 2),
    }


async def many_sessions(settings: Settings, storage: Storage, sessions: int, turns: int) -> dict[str, float]:
    runtime = Orchestrator.create(settings, model=EchoModel(), tools=[echo], storage=storage)

    async def converse(number: int) -> None:
        session = runtime.session(user_id=f"user-{number % 10}", session_id=f"many-{number}")
        for turn in range(turns):
            await session.run(f"<s{number}> turn {turn}")

    started = time.perf_counter()
    await asyncio.gather(*(converse(n) for n in range(sessions)))
    elapsed = time.perf_counter() - started
    lost = crossed = 0
    for number in range(sessions):
        user_id = f"user-{number % 10}"
        history = await runtime.session(user_id=user_id, session_id=f"many-{number}").history()
        async with storage.database.user_transaction(user_id) as connection:
            archived = [
                row[0]
                for row in await connection.execute(
                    text("SELECT content FROM messages WHERE session_id = :s"), {"s": f"many-{number}"}
                )
            ]
        for texts in ([m.text for m in history], archived):
            lost += max(0, 4 * turns - len(texts))  # question, tool call, tool result, answer
            crossed += sum(1 for t in texts for found in MARKER.findall(t) if found != f"s{number}")
    return {"turns_per_s": round(sessions * turns / elapsed, 1), "lost": lost, "crossed": crossed}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=10)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        settings = load_settings(
            data_dir=Path(directory), sub_graphs_dir=Path(directory) / "none", embeddings="none"
        )
        storage = await Storage.open(settings)
        try:
            figures = await next_turn(settings, storage, options.repeats)
            print(
                f"next turn during a {BACKGROUND_SECONDS:g}s background task answered in "
                f"{figures['next_turn_overhead_ms']} ms (idle session: {figures['idle_turn_ms']} ms; "
                f"median of paired ratios {figures['next_turn_ratio']})"
            )
            figures |= await many_sessions(settings, storage, options.sessions, options.turns)
            print(
                f"{options.sessions} sessions x {options.turns} turns at once: {figures['turns_per_s']} turns/s, "
                f"lost {figures['lost']}, crossed {figures['crossed']}"
            )
        finally:
            await storage.close()
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
