"""Long conversations: a turn in a session of 10,000 messages against one of 10 (issue 29).

    .venv/bin/python scripts/bench_context.py [--messages 10000] [--pairs 40] [--window 32000] [--shipped]

Both sessions run in this process as a chat runs them: with storage on an embedded
PostgreSQL of the run's own (a fresh cluster in a temporary directory; checkpoints and
the message archive, no embedding model), the scripted (zero-latency) model and the
product's default model chain, compaction included. The long session is filled with
alternating user and model messages (about 60 tokens each) and opened (which archives
them, as a session a stopped process left is), then each session gets one warm-up turn
(the long one compacts in it), then turns alternate between the two sessions, `--pairs`
of each.

- `turn_ratio_10k`: median turn time of the long session ÷ median of the short one
  (target ≤ 1.5).
- `max_request_tokens_ratio`: the largest prompt any model call got (the estimate of
  `llm/tokens.py`: system message, messages, tool schemas), summary calls included,
  ÷ the window (target ≤ 1.0); `max_request_tokens` and `window` beside it.
- `compacted_turns`: turns (warm-up included) that wrote a summary; `summary_calls`: the
  model calls that asked for one; `compactions_saving_nothing`: turns whose compaction
  saved no tokens (target 0).
- `tool_tokens`: what the tools' schemas take of every call. With `--shipped` the tools
  are the shipped sub_graphs/ folders' (approved in the run's own data directory), as a
  new user's are: `--window 4096 --shipped` is a small local model's window crowded by
  them (issue 42).
- `held_messages_long`: messages the long session's checkpoint holds at the end
  (what the model sees and the last turn); the archive holds all of them
  (`archived_messages_long`, which `/history` reads).

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from orchestrator.conversation.session import Session
from orchestrator.graph.builder import MODEL_NODE
from orchestrator.llm.summary import is_summary_request
from orchestrator.llm.tokens import estimate_tokens, prompt_tokens
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store.embedded import embedded_logins, leave_embedded_server
from orchestrator.store.storage import Storage
from orchestrator.testing import ScriptedChatModel

SHIPPED = Path(__file__).resolve().parents[1] / "sub_graphs"
TEXT = (  # with its number, about 60 tokens (llm/tokens.py's estimate)
    "We talked about the garden party on Saturday: who brings the chairs and the tables, "
    "whether the lemonade is made the night before, where the cake goes if it rains, "
    "and which of the neighbours to ask about borrowing their big umbrella. "
)


def reply(messages: list[BaseMessage]) -> str:
    if isinstance(messages[0], SystemMessage) and is_summary_request(messages[0].text):
        return "Summary: a long talk about a garden party."
    return "Noted."


async def filled(runtime: Orchestrator, messages: int) -> Session:
    session = runtime.session(user_id="bench", session_id=uuid.uuid4().hex[:12])
    history: list[BaseMessage] = []
    for n in range(messages // 2):
        history.append(HumanMessage(f"{TEXT}({n})", id=uuid.uuid4().hex))
        history.append(AIMessage(f"Noted. {TEXT}({n})", id=uuid.uuid4().hex))
    await session.graph.aupdate_state(session.config, {"messages": history}, as_node=MODEL_NODE)
    await session.open()  # archives them
    return session


async def timed(session: Session, text: str) -> tuple[float, dict[str, object] | None]:
    start = time.perf_counter()
    result = await session.run(text)
    return time.perf_counter() - start, result.compacted


async def main(arguments: argparse.Namespace, home: Path) -> dict[str, object]:
    model = ScriptedChatModel(steps=[reply] * (4 * arguments.pairs + 20))
    logins = embedded_logins(home / "server", database="context")
    settings = load_settings(
        database_url=logins.owner_url,
        database_app_url=logins.app_url,
        data_dir=home / "data",
        sub_graphs_dir=SHIPPED if arguments.shipped else home / "none",
        embeddings="none",
        context_tokens=arguments.window,
    )
    storage = await Storage.open(settings)
    try:
        if arguments.shipped:  # every folder approved, as a person answering yes would
            runtime = Orchestrator.create(settings, model=model, storage=storage, ask=lambda f, s: True)
        else:
            runtime = Orchestrator.create(settings, model=model, tools=[], storage=storage)
        return await measure(runtime, model, arguments)
    finally:
        await storage.close()


async def measure(
    runtime: Orchestrator, model: ScriptedChatModel, arguments: argparse.Namespace
) -> dict[str, object]:
    short = await filled(runtime, 10)
    long = await filled(runtime, arguments.messages)
    compacted: list[dict[str, object]] = []
    for session in (short, long):
        did = (await timed(session, "warm-up"))[1]
        compacted += [did] if did is not None else []
    times: dict[str, list[float]] = {"short": [], "long": []}
    for pair in range(arguments.pairs):
        for name, session in (("short", short), ("long", long)):
            seconds, did = await timed(session, f"And now? ({pair})")
            times[name].append(seconds)
            compacted += [did] if did is not None else []
    tools = estimate_tokens(json.dumps([convert_to_openai_tool(t) for t in runtime.tools]))
    summaries = [is_summary_request(received[0].text) for received in model.received]
    largest = max(
        prompt_tokens(received) + (0 if summary else tools)  # a summary call sends no tools
        for received, summary in zip(model.received, summaries, strict=True)
    )
    held = (await long.graph.aget_state(long.config)).values["messages"]
    return {
        "messages": arguments.messages,
        "turn_ms_10": round(1000 * statistics.median(times["short"]), 2),
        "turn_ms_long": round(1000 * statistics.median(times["long"]), 2),
        "turn_ratio_10k": round(statistics.median(times["long"]) / statistics.median(times["short"]), 2),
        "max_request_tokens": largest,
        "window": arguments.window,
        "max_request_tokens_ratio": round(largest / arguments.window, 3),
        "compacted_turns": len(compacted),
        "summary_calls": sum(summaries),
        "compactions_saving_nothing": sum(not c["saved_tokens"] for c in compacted),
        "tool_tokens": tools,
        "held_messages_long": len(held),
        "archived_messages_long": len(await long.history()),
    }


def run(arguments: argparse.Namespace) -> dict[str, object]:
    """`main` on an embedded PostgreSQL of its own, stopped and removed after."""
    for name in [n for n in os.environ if n.startswith("ORCHESTRATOR_")]:
        del os.environ[name]  # the product's defaults, not the developer's settings
    with tempfile.TemporaryDirectory(prefix="bench-context-") as directory:
        home = Path(directory)
        os.environ["ORCHESTRATOR_HOME"] = str(home)
        try:
            return asyncio.run(main(arguments, home))
        finally:
            leave_embedded_server(home / "server")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--window", type=int, default=32_000)
    parser.add_argument("--shipped", action="store_true", help="with the shipped sub_graphs/ folders' tools")
    print(json.dumps(run(parser.parse_args())))
