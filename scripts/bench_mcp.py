"""MCP servers as tool folders: startup with three of them, and what a call costs.

    .venv/bin/python scripts/bench_mcp.py [--rounds 7] [--calls 200]

- `startup_ratio`: `orchestrator ask hi --json` (offline model, the
  embedded PostgreSQL) from the start of its process to its answer, with
  three approved stdio servers (the reference `mcp-server-time` under two
  names and `mcp-server-git`: their tools offered from the approved
  definitions; a server starts at its tools' first call, which `ask hi`
  does not make) ÷ the same with no tool folder. Alternating, median of
  paired ratios.
- `call_overhead_ratio`: one call of an MCP tool (a FastMCP echo server over
  stdio, its session kept) ÷ the same work as a folder tool, both through
  the whole dispatch pipeline as in chat, request log on the embedded
  PostgreSQL included. Alternating, median of paired ratios.
  `call_overhead_ratio_bare` is the same without the request log (the
  inter-process round trip against an in-process call), and
  `sdk_overhead_ratio` our MCP call without the log ÷ the session's own
  call (`McpClient.call`: the `tools/call` on the kept session): what the
  pipeline adds.
  `call_overhead_ratio_text` is `call_overhead_ratio` for a tool of the same
  server that returns text only: no output schema, which the SDK's server
  checks against its metaschema on every call (about 1.8 ms here).
- `sandbox_call_ratio`: a call of the echo server under its default sandbox
  (Landlock and resource limits, see docs/sandbox.md) ÷ the same server
  unconfined (`isolation: inline`), both through the pipeline without the log.
  Alternating, median of paired ratios (target <= 1.1).
- `sandbox_startup_ratio`: the reference `mcp-server-time` started (launched,
  initialized, its tools listed) under its default sandbox ÷ unconfined, each
  start closed before the next. Alternating, median of paired ratios (target
  <= 1.2).
- `pool_ratio`: 10 calls at once of a tool that blocks its server for 50 ms
  (a synchronous FastMCP tool, over stdio), on a pool of 4 sessions
  (`mcp: {pool: 4}`: four processes) ÷ on one session, each session started
  before. Alternating, median of paired ratios; 0.3 would be the four
  working fully in parallel (three rounds of calls against ten).

Last line, one JSON object of these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NAP_SECONDS = 0.05
POOL = 4
CONCURRENT_CALLS = 10
ECHO_SERVER = f'''
from mcp.server.fastmcp import FastMCP

NAP_SECONDS = {NAP_SECONDS}

app = FastMCP("echo")


@app.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@app.tool(structured_output=False)
def say(text: str) -> str:
    """Repeat the text, as text only (no output schema for either side to check)."""
    return text


@app.tool(structured_output=False)
def nap() -> str:
    """Block the whole server for a moment, as a synchronous tool does."""
    import time

    time.sleep(NAP_SECONDS)
    return "rested"


app.run()
'''
ECHO_TOOL = '''
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Text(BaseModel):
    text: str


class Fecho(Tool):
    @action(Text)
    async def echo(self, params: Text, request: ToolRequest) -> ToolResult:
        """Repeat the text."""
        return request.result(params.text)
'''
SERVERS = {
    "clock": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
    "clock_two": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
    "git": {"command": "mcp-server-git", "args": []},
}


def folder(
    root: Path,
    name: str,
    mcp: dict[str, object] | None = None,
    code: str = "",
    sandbox: dict[str, object] | None = None,
) -> None:
    import yaml

    path = root / name
    path.mkdir(parents=True)
    config: dict[str, object] = {
        "name": name,
        "description": f"{name} for the benchmark",
        "version": "1",
    }
    if mcp is not None:
        config["mcp"] = mcp
    if sandbox is not None:
        config["sandbox"] = sandbox
    (path / "tool_config.yaml").write_text(yaml.safe_dump(config))
    if code:
        (path / f"{name}_tool.py").write_text(code)


def until_answer(env: dict[str, str], *, answers: str = "") -> float:
    """Seconds from starting `orchestrator ask` to its answer (`answers`: its standard input)."""
    args = [sys.executable, "-m", "orchestrator", "ask", "--answers-from-stdin", "hi", "--json"]
    started = time.perf_counter()
    with subprocess.Popen(
        args,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(answers)
        child.stdin.close()
        line = child.stdout.readline()
        elapsed = time.perf_counter() - started
        child.wait()
    if '"answer"' not in line:
        raise SystemExit(f"ask did not answer: {line!r}")
    return elapsed


def startup_ratio(home: Path, rounds: int) -> dict[str, float]:
    envs = {}
    for case in ("none", "three"):
        sub_graphs = home / case / "sub_graphs"
        sub_graphs.mkdir(parents=True)
        if case == "three":
            for name, mcp in SERVERS.items():
                folder(sub_graphs, name, mcp)
        envs[case] = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "ORCHESTRATOR_HOME": str(home / case),
            "ORCHESTRATOR_DATA_DIR": str(home / case / "data"),
            "ORCHESTRATOR_SUB_GRAPHS_DIR": str(sub_graphs),
        }
        until_answer(envs[case], answers="y\n" * 6)  # approve the folders and the servers' tools
    ratios, alone, three = [], [], []
    for _ in range(rounds):
        alone.append(until_answer(envs["none"]))
        three.append(until_answer(envs["three"]))
        ratios.append(three[-1] / alone[-1])
    return {
        "startup_ratio": round(statistics.median(ratios), 2),
        "startup_none_s": round(statistics.median(alone), 2),
        "startup_three_s": round(statistics.median(three), 2),
    }


async def call_ratios(home: Path, calls: int) -> dict[str, float]:
    from orchestrator.dispatch.dispatcher import Dispatcher
    from orchestrator.levels import Limits
    from orchestrator.llm.offline import OfflineChatModel
    from orchestrator.runtime import Orchestrator
    from orchestrator.settings import load_settings
    from orchestrator.store import Storage
    from orchestrator.tools.context import RunContext, UserDatabase

    sub_graphs = home / "calls" / "sub_graphs"
    (home / "calls").mkdir()
    echo = {"command": sys.executable, "args": ["echo_server.py"]}  # in its folder: readable
    folder(sub_graphs, "echo", echo)
    folder(sub_graphs, "free", echo, sandbox={"isolation": "inline"})
    for name in ("echo", "free"):
        (sub_graphs / name / "echo_server.py").write_text(ECHO_SERVER)
    folder(sub_graphs, "fecho", code=ECHO_TOOL)
    settings = load_settings(
        data_dir=home / "calls" / "data", sub_graphs_dir=sub_graphs, embeddings="none"
    )
    storage = await Storage.open(settings)
    yes = lambda *_: True  # noqa: E731
    runtime = await Orchestrator.start(
        settings, model=OfflineChatModel(), storage=storage, ask=yes, ask_server=yes
    )
    try:
        dispatcher = Dispatcher(runtime.tools, limits=Limits.from_settings(settings))
        logged = RunContext(
            user_id="bench",
            session_id="bench",
            observer=storage.requests,
            database=UserDatabase(storage.database, "bench"),
        )
        bare = RunContext(user_id="bench")
        echo = next(t for t in runtime.tools if t.name == "echo_echo")
        server = echo.server  # type: ignore[attr-defined]

        def call(name: str, context: RunContext) -> Callable[[], Awaitable[object]]:
            async def once() -> object:
                number = next(counter)
                request = dispatcher.request(
                    {"name": name, "args": {"text": "hi"}, "id": f"c{number}", "type": "tool_call"},
                    context,
                )
                result = await dispatcher.dispatch(request)
                assert result.status == "success", result.message
                return result

            return once

        async def sdk() -> object:
            return await server.call("echo", {"text": "hi"})

        counter = iter(range(10**9))
        return {
            "call_overhead_ratio": await paired(
                call("echo_echo", logged), call("fecho_echo", logged), calls
            ),
            "call_overhead_ratio_text": await paired(
                call("echo_say", logged), call("fecho_echo", logged), calls
            ),
            "call_overhead_ratio_bare": await paired(
                call("echo_echo", bare), call("fecho_echo", bare), calls
            ),
            "sdk_overhead_ratio": await paired(call("echo_echo", bare), sdk, calls),
            "sandbox_call_ratio": await paired(
                call("echo_echo", bare), call("free_echo", bare), calls
            ),
        }
    finally:
        await runtime.close()
        await storage.close()


async def sandbox_startup_ratio(home: Path, rounds: int) -> dict[str, float]:
    """mcp-server-time started and closed under its default sandbox, against unconfined."""
    from orchestrator.folders.mcp_config import McpServerConfig
    from orchestrator.folders.sandbox_config import SandboxConfig, data_directory
    from orchestrator.sources.mcp.client import McpClient
    from orchestrator.sources.mcp.sandboxed import ServerSandbox

    where = home / "sandbox_start"
    where.mkdir()
    config = McpServerConfig.model_validate(SERVERS["clock"])
    sandbox = ServerSandbox(config=SandboxConfig(), data=data_directory(where / "data", "clock"))

    def client(held: bool) -> McpClient:
        return McpClient(
            name="clock",
            config=config,
            folder=where,
            errlog=where / "clock.log",
            sandbox=sandbox if held else None,
        )

    async def start(held: bool) -> Callable[[], Awaitable[object]]:
        async def once() -> object:
            server = client(held)
            definition = await server.start()
            await server.close()
            return definition

        return once

    held, free = await start(True), await start(False)
    ratio = await paired(held, free, rounds, warm_up=2)
    return {"sandbox_startup_ratio": ratio}


async def pool_ratio(home: Path, rounds: int) -> dict[str, float]:
    """Concurrent calls of a blocking tool on a pool of sessions, against one session."""
    from orchestrator.folders.mcp_config import McpServerConfig
    from orchestrator.sources.mcp.client import McpClient
    from orchestrator.sources.mcp.pool import McpServer, pooled

    where = home / "pool"
    where.mkdir()
    (where / "echo_server.py").write_text(ECHO_SERVER)
    config = McpServerConfig(command=sys.executable, args=["echo_server.py"], cwd=".")

    def server(size: int) -> McpServer:
        log = where / "echo.log"
        return pooled(size, lambda: McpClient(name="echo", config=config, folder=where, errlog=log))

    def at_once(target: McpServer) -> Callable[[], Awaitable[object]]:
        async def once() -> object:
            return await asyncio.gather(*(target.call("nap", {}) for _ in range(CONCURRENT_CALLS)))

        return once

    pool, single = server(POOL), server(1)
    try:
        ratio = await paired(at_once(pool), at_once(single), rounds, warm_up=2)
    finally:
        await pool.close()
        await single.close()
    print(f"{CONCURRENT_CALLS} calls at once: a pool of {POOL} takes {ratio}x the time of one session")
    return {"pool_ratio": ratio}


async def paired(
    ours: Callable[[], Awaitable[object]],
    peer: Callable[[], Awaitable[object]],
    calls: int,
    *,
    warm_up: int = 10,
) -> float:
    for _ in range(warm_up):  # warm up both
        await ours()
        await peer()
    ratios = []
    for _ in range(calls):
        ratios.append(await timed(ours) / await timed(peer))
    return round(statistics.median(ratios), 2)


async def timed(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as directory:
        home = Path(directory)
        figures = startup_ratio(home, options.rounds)
        print(
            f"ask answered in {figures['startup_three_s']} s with three MCP servers, "
            f"{figures['startup_none_s']} s with none"
        )
        figures |= asyncio.run(call_ratios(home, options.calls))
        figures |= asyncio.run(sandbox_startup_ratio(home, options.rounds * 3))
        figures |= asyncio.run(pool_ratio(home, options.rounds * 3))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
