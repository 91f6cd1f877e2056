"""Overhead of the orchestrator graph, side by side with LangGraph's prebuilt agent.

    .venv/bin/python scripts/bench_overhead.py [--round-trips 100] [--pairs 21]
        [--parallel-pairs 5] [--no-planning]

Every figure is a ratio of two runs measured alternately in this process, so
the machine's speed cancels out. Our graph is the product's default: it plans
(the plan tool bound beside the tools, the plan executor's nodes in the graph);
`--no-planning` leaves planning out. Prints one line per measurement, then one
JSON object:
- ratio_vs_prebuilt: time for N tool round trips (model -> no-op tool -> model)
  through our graph / the same through LangChain's agent given the same feature
  the way LangChain documents it: ours plans, so the peer is `create_agent` with
  its `TodoListMiddleware` (its planning tool and prompt); both with the same
  zero-latency model. `--no-planning`: ours without planning / `create_agent`
  without middleware. Pairs of runs alternate (which goes first alternates too);
  the median of the pairs' ratios, each pair measured within a second, so the
  machine's load, which drifts, enters both sides of a ratio alike.
- ratio_vs_react_agent: ours without planning / LangGraph's older prebuilt
  `create_react_agent` (deprecated in favour of `create_agent`), the same way;
  no target, beside the figures of earlier runs.
- pipeline_ratio: a no-op tool call through the whole dispatch pipeline
  (request log, scope, validation, approval, background, usage, timeout)
  / the same tool invoked bare by LangChain, alternated; median.
- parallel_ratio: wall time of one turn through our graph whose model calls 10
  async tools at once, each sleeping 200 ms, / the same turn with one such
  call; the two alternate (which goes first alternates too), median of
  `--parallel-pairs` paired ratios. 1.0: the calls overlap fully; 10: they
  run one after another.
- parallel_ratio_sync_tools: the same with blocking `time.sleep` tools, on the
  thread pool the CLI sets up.
- tracing_ratio: N tool round trips through our graph with tracing on (a span per
  model call and per tool call, exported over OTLP/HTTP in batches to a receiver on
  127.0.0.1, a process of its own as a collector is) / the same graph without,
  in alternating pairs as above; each traced run ends with the exporter's flush,
  timed with it (its spans encoded and sent in its time, not in the next run's);
  median of the pairs' ratios (target <= 1.10).
- process_isolation_ratio: a no-op action of a tool folder in its process (the
  default for a folder not shipped: its warm child, held by Landlock) / the
  same action of the same folder with `isolation: inline`, both through the
  whole dispatch pipeline with the request log on the embedded PostgreSQL;
  alternating, median of paired ratios (target <= 1.2).
- ratio_vs_prebuilt_cpu, tracing_ratio_cpu: the same two ratios in CPU seconds
  of this process (all its threads; the receiver's not): on a shared machine
  they move less than wall time, which the other processes' work enters. The
  targets are the wall-time figures'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool

from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.levels import Limits, Planning
from orchestrator.runtime import use_tool_threads
from orchestrator.tools.context import RunContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noop_folder import write_noop_folder  # noqa: E402

SLEEP_SECONDS = 0.2
PARALLEL_CALLS = 10


class LoopModel(BaseChatModel):
    """Zero-latency: calls the tools named in `calls` after a user message, answers after results."""

    calls: list[str] = ["noop"]

    @property
    def _llm_type(self) -> str:
        return "loop"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="done")
        else:
            reply = AIMessage(
                content="",
                tool_calls=[{"name": n, "args": {}, "id": f"c{i}"} for i, n in enumerate(self.calls)],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


@tool
async def nap() -> str:
    """Sleep without blocking."""
    await asyncio.sleep(SLEEP_SECONDS)
    return "rested"


@tool
def blocking_nap() -> str:
    """Sleep, blocking a thread."""
    time.sleep(SLEEP_SECONDS)
    return "rested"


LIMITS = Limits(max_iterations=5, max_result_chars=4000, timeout_seconds=60.0)


PLANNING: Planning | None = Planning()  # as ORCHESTRATOR_PLANNING's default


def ours(model: BaseChatModel, tools: list[BaseTool]) -> Runnable:
    return build_agent_graph(AgentSpec(model=model, tools=tools, limits=LIMITS, planning=PLANNING))


def prebuilt(model: BaseChatModel, tools: list[BaseTool]) -> Runnable:
    """LangChain's agent, planning as its docs show when ours plans (its to-do list tool)."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import TodoListMiddleware

    return create_agent(model, tools, middleware=[TodoListMiddleware()] if PLANNING else [])


def react_agent(model: BaseChatModel, tools: list[BaseTool]) -> Runnable:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's
        return create_react_agent(model, tools)


async def timed(work: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


async def round_trips(graph: Runnable, count: int) -> None:
    for _ in range(count):
        await graph.ainvoke({"messages": [HumanMessage("go")]})


Runs = dict[str, list[tuple[float, float]]]


async def alternated(
    graphs: dict[str, Runnable],
    round_trip_count: int,
    pairs: int,
    *,
    settle: dict[str, Callable[[], object]] | None = None,
) -> Runs:
    """Each graph's wall and CPU seconds for `round_trip_count` round trips, `pairs` times.

    The graphs take turns, and which goes first alternates too. CPU seconds are
    this process's, all its threads (the exporter's too): the machine's other
    work does not count in them, as it does in wall time. `settle[name]()` ends
    each run of that graph, timed with it (the exporter's flush).
    """
    for graph in graphs.values():
        await round_trips(graph, 20)  # warm up
    runs: Runs = {name: [] for name in graphs}
    for pair in range(pairs):
        order = list(graphs) if pair % 2 == 0 else list(reversed(graphs))
        for name in order:
            started, used = time.perf_counter(), time.process_time()
            await round_trips(graphs[name], round_trip_count)
            if settle and name in settle:
                settle[name]()
            runs[name].append((time.perf_counter() - started, time.process_time() - used))
    return runs


def paired(runs: Runs, over: str, under: str) -> tuple[float, float]:
    """The median of `over` ÷ `under` over the pairs, in wall time and in CPU time."""
    pairs = list(zip(runs[over], runs[under], strict=True))
    return (
        statistics.median(a[0] / b[0] for a, b in pairs),
        statistics.median(a[1] / b[1] for a, b in pairs),
    )


def report(runs: Runs, round_trip_count: int) -> None:
    for name, times in runs.items():
        wall, cpu = (statistics.median(t[i] for t in times) for i in (0, 1))
        print(f"{name}: {round_trip_count} round trips, median {wall:.3f}s ({cpu:.3f}s CPU)")


async def overhead_ratios(round_trip_count: int, pairs: int) -> dict[str, float]:
    """Ours ÷ LangChain's agent (planning alike), and ours unplanned ÷ the older prebuilt."""
    model = LoopModel()
    graphs = {"ours": ours(model, [noop]), "create_agent": prebuilt(model, [noop])}
    runs = await alternated(graphs, round_trip_count, pairs)
    report(runs, round_trip_count)
    vs_prebuilt, vs_prebuilt_cpu = paired(runs, "ours", "create_agent")
    unplanned = {
        "ours_unplanned": build_agent_graph(AgentSpec(model=model, tools=[noop], limits=LIMITS)),
        "create_react_agent": react_agent(model, [noop]),
    }
    runs = await alternated(unplanned, round_trip_count, pairs)
    report(runs, round_trip_count)
    return {
        "ratio_vs_prebuilt": vs_prebuilt,
        "ratio_vs_prebuilt_cpu": vs_prebuilt_cpu,
        "ratio_vs_react_agent": paired(runs, "ours_unplanned", "create_react_agent")[0],
    }


async def pipeline_ratio(calls: int, repeats: int) -> float:
    """A call through the whole dispatch pipeline / the same tool invoked bare by LangChain."""
    dispatcher = Dispatcher([noop], limits=LIMITS)
    context = RunContext(user_id="bench", session_id="bench")
    call = {"name": "noop", "args": {}, "id": "c1", "type": "tool_call"}

    async def piped() -> None:
        for _ in range(calls):
            await dispatcher.dispatch(dispatcher.request(call, context))  # type: ignore[arg-type]

    async def bare() -> None:
        for _ in range(calls):
            await noop.ainvoke({})

    seconds: dict[str, list[float]] = {"pipeline": [], "bare": []}
    for _ in range(repeats):
        seconds["pipeline"].append(await timed(piped))
        seconds["bare"].append(await timed(bare))
    pipeline, direct = (statistics.median(seconds[k]) for k in ("pipeline", "bare"))
    print(
        f"dispatch pipeline: {pipeline / calls * 1e6:.0f} us per call, "
        f"bare ainvoke {direct / calls * 1e6:.0f} us ({calls} calls, median of {repeats})"
    )
    return pipeline / direct


async def parallel_ratio(sleeper: BaseTool, pairs: int) -> float:
    """A turn of PARALLEL_CALLS calls of `sleeper` / the same with one call; median of pairs."""
    graphs = {
        count: ours(LoopModel(calls=[sleeper.name] * count), [sleeper])
        for count in (PARALLEL_CALLS, 1)
    }
    for graph in graphs.values():  # first turns pay one-off costs (caches, schemas)
        await round_trips(graph, 1)
    seconds: dict[int, list[float]] = {count: [] for count in graphs}
    for pair in range(pairs):
        order = list(graphs) if pair % 2 == 0 else list(reversed(graphs))
        for count in order:
            seconds[count].append(await timed(lambda g=graphs[count]: round_trips(g, 1)))
    ratios = [many / one for many, one in zip(seconds[PARALLEL_CALLS], seconds[1], strict=True)]
    print(
        f"{PARALLEL_CALLS} x {sleeper.name} ({SLEEP_SECONDS * 1000:.0f} ms each): "
        f"{statistics.median(seconds[PARALLEL_CALLS]):.3f}s, "
        f"one call {statistics.median(seconds[1]):.3f}s "
        f"(medians of {pairs})"
    )
    return statistics.median(ratios)


# A collector of its own process, as in production: its work is not this process's.
RECEIVER = """
import http.server, sys
class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


async def tracing_ratio(round_trip_count: int, pairs: int) -> tuple[float, float]:
    """Round trips with tracing exporting to a local receiver / the same graph without tracing."""
    from orchestrator.tracing import provider

    plain = ours(LoopModel(), [noop])  # built with tracing off: no tracing middleware
    receiver = subprocess.Popen(
        [sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True
    )
    assert receiver.stdout is not None
    port = int(receiver.stdout.readline())
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    try:
        traced = ours(LoopModel(), [noop])
        runs = await alternated(
            {"traced": traced, "plain": plain},
            round_trip_count,
            pairs,
            settle={"traced": provider.flush},  # a run's spans are sent in its time
        )
    finally:
        provider.shutdown()
        del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
        receiver.kill()
        receiver.wait()
    report(runs, round_trip_count)
    return paired(runs, "traced", "plain")


async def process_isolation_ratio(calls: int) -> float:
    """A no-op action in a folder's held process / inline, through the pipeline and request log."""
    import tempfile

    from orchestrator.llm.offline import OfflineChatModel
    from orchestrator.runtime import Orchestrator
    from orchestrator.settings import load_settings
    from orchestrator.store import Storage
    from orchestrator.tools.context import UserDatabase

    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as directory:
        sub_graphs = Path(directory) / "sub_graphs"
        for name, isolation in (("inline", "inline"), ("held", "process")):
            sandbox: dict[str, object] = {"isolation": isolation}
            write_noop_folder(sub_graphs, name, action="noop", reply="done", sandbox=sandbox)
        settings = load_settings(
            data_dir=Path(directory) / "data", sub_graphs_dir=sub_graphs, embeddings="none"
        )
        storage = await Storage.open(settings)
        yes = lambda *_: True  # noqa: E731
        runtime = await Orchestrator.start(
            settings, model=OfflineChatModel(), storage=storage, ask=yes, ask_server=yes
        )
        try:
            dispatcher = Dispatcher(runtime.tools, limits=LIMITS)
            context = RunContext(
                user_id="bench",
                session_id="bench",
                observer=storage.requests,
                database=UserDatabase(storage.database, "bench"),
            )
            numbers = iter(range(10**9))

            async def once(name: str) -> float:
                call = {"name": name, "args": {}, "id": f"c{next(numbers)}", "type": "tool_call"}
                started = time.perf_counter()
                result = await dispatcher.dispatch(dispatcher.request(call, context))  # type: ignore[arg-type]
                assert result.status == "success", result.message
                return time.perf_counter() - started

            for _ in range(20):  # warm up both
                await once("held_noop")
                await once("inline_noop")
            ratios = [await once("held_noop") / await once("inline_noop") for _ in range(calls)]
        finally:
            await runtime.close()
            await storage.close()
    ratio = statistics.median(ratios)
    print(f"a no-op action in its held process: {ratio:.2f}x inline ({calls} pairs, median)")
    return ratio


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=21)
    parser.add_argument("--parallel-pairs", type=int, default=5)
    parser.add_argument("--no-planning", action="store_true", help="our graph without planning")
    options = parser.parse_args()
    global PLANNING
    PLANNING = None if options.no_planning else PLANNING
    use_tool_threads()
    figures = await overhead_ratios(options.round_trips, options.pairs)
    figures |= {
        "pipeline_ratio": await pipeline_ratio(2000, options.pairs),
        "parallel_ratio": await parallel_ratio(nap, options.parallel_pairs),
        "parallel_ratio_sync_tools": await parallel_ratio(blocking_nap, options.parallel_pairs),
    }
    figures["tracing_ratio"], figures["tracing_ratio_cpu"] = await tracing_ratio(
        options.round_trips, options.pairs
    )
    figures["process_isolation_ratio"] = await process_isolation_ratio(options.round_trips)
    print(json.dumps({key: round(value, 3) for key, value in figures.items()}))


if __name__ == "__main__":
    asyncio.run(main())
