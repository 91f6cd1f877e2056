"""Whole commands against simonw/llm, on one local scripted OpenAI-compatible server.

    .venv/bin/python scripts/bench_cli.py [--pairs 15] [--mcp-runs 5] [--profile] [--mcp-only]

One server (orchestrator.testing's OpenAICompatibleServer, on 127.0.0.1 in this
process) answers both sides with the same text. Each side is a whole process,
timed from its start to its end, and stores what it was asked: `llm` in its
SQLite log (a temporary LLM_USER_PATH whose `extra-openai-models.yaml` names the
model `fake` at the server's URL, as llm's docs configure an OpenAI-compatible
model), ours in its embedded PostgreSQL under a temporary home, with the
product's default settings (the developer's ORCHESTRATOR_*, OPENAI_*, DATABASE_*
variables and .env are ignored) but the model, which is the same server.

- ask_vs_llm: `orchestrator ask TEXT` ÷ `llm -m fake TEXT`, alternated (which goes
  first alternates too), median of `--pairs` paired ratios, with the product's
  defaults: the database and the warm process (`orchestrator.warm`) kept running
  between commands, as a person's second command of the day finds them. Target ≤ 1.5.
- run_vs_llm: `orchestrator run noop nothing --json '{}'` (a no-op action of a
  folder the bench writes, `isolation: inline`, and approves) ÷ the same `llm`
  prompt. Target ≤ 1.0.
- long_ask_vs_llm: as ask_vs_llm with `ORCHESTRATOR_WARM_MINUTES=0`: every `ask`
  loads the product itself (the database still warm). No target.
- cold_ask_vs_llm: as long_ask_vs_llm, with the embedded database stopped before
  each `ask` too (`orchestrator db stop`, untimed, where the command has it;
  before it existed every `ask` was cold). No target.
- mcp_serve_ready_s: `orchestrator mcp serve` (stdio) from its start to the first
  `tools/list` answered, through the `mcp` SDK's client; median of `--mcp-runs`,
  with the defaults (the warm process runs it). Target ≤ 1.5 s.
- mcp_serve_long_ready_s: the same with `ORCHESTRATOR_WARM_MINUTES=0`, the server
  loading the product itself. No target.
  `--mcp-only` measures these two alone (after one untimed `run` of the no-op
  action, which records its folder's manifest as the other figures do).

`--profile` prints, before the figures, where one `ask`'s time goes: its 15
costliest imports (`python -X importtime`, cumulative) and the embedded server's
start and stop, timed around an empty command that only joins and leaves it.

A line per figure, then the last line one JSON object with the figures and the
medians in seconds. Nothing is asserted: the machine's speed cancels out of the ratios.
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
from collections.abc import Callable
from pathlib import Path

import yaml

from orchestrator.testing import OpenAICompatibleServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noop_folder import write_noop_folder  # noqa: E402

BIN = Path(sys.executable).parent
PROMPT = "hello there"
MODEL = "fake"
ANSWER = "Hello! How can I help?"
# Settings of the caller's environment that must not reach either side.
FOREIGN = ("ORCHESTRATOR_", "OPENAI_", "DATABASE_", "OTEL_", "LANGSMITH_", "LANGCHAIN_", "LLM_")
OURS_ASK = [str(BIN / "orchestrator"), "ask", PROMPT]
OURS_RUN = [str(BIN / "orchestrator"), "run", "noop", "nothing", "--json", "{}"]
LLM = [str(BIN / "llm"), "-m", MODEL, PROMPT]


class ProcessFailed(Exception):
    """A measured process did not do its work."""


def environments(home: Path, base_url: str) -> tuple[dict[str, str], dict[str, str]]:
    """Ours and llm's environments: the caller's without its settings, and each side's own."""
    # Nor a developer's PYTHONDONTWRITEBYTECODE: a person's installation has its bytecode.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN) and k != "PYTHONDONTWRITEBYTECODE"}
    ours = clean | {
        "ORCHESTRATOR_HOME": str(home / "ours"),
        "XDG_DATA_HOME": str(home / "user-data"),  # the approvals' signing key
        "ORCHESTRATOR_MODEL": f"openai:{MODEL}",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "bench-key",
        "XDG_RUNTIME_DIR": str(home / "run"),  # a warm process of the bench's own
    }
    (home / "run").mkdir(mode=0o700)
    llm_home = home / "llm"
    llm_home.mkdir(parents=True)
    models = [{"model_id": MODEL, "model_name": MODEL, "api_base": base_url, "api_key_name": "bench"}]
    (llm_home / "extra-openai-models.yaml").write_text(yaml.safe_dump(models))
    (llm_home / "keys.json").write_text(json.dumps({"bench": "bench-key"}))
    return ours, clean | {"LLM_USER_PATH": str(llm_home)}


def prepare(ours: dict[str, str]) -> None:
    """Our home with the no-op folder in it, approved as a person would from a script."""
    sub_graphs = Path(ours["ORCHESTRATOR_HOME"]) / "sub_graphs"
    # Inline, as the figures before process isolation became the default were measured: a held
    # folder's start adds its child's (bench_overhead's process_isolation_ratio measures calls).
    write_noop_folder(sub_graphs, "noop", action="nothing", reply="ok", sandbox={"isolation": "inline"})
    run([str(BIN / "orchestrator"), "tools", "approve", "noop"], ours)


def run(args: list[str], env: dict[str, str], *, expect: str = "") -> float:
    """Wall seconds of the whole process `args`; it must succeed and print `expect`."""
    started = time.perf_counter()
    done = subprocess.run(
        args, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or expect not in done.stdout:
        last = (done.stderr.strip().splitlines() or [done.stdout.strip() or "no output"])[-1]
        raise ProcessFailed(f"{' '.join(args)} failed ({done.returncode}): {last}")
    return elapsed


def stopper(ours: dict[str, str], *parts: str) -> Callable[[], None]:
    """Stops the embedded database (`db`) or the warm process (`warm`), where the command exists."""
    asked = [str(BIN / "orchestrator"), *parts, "stop", "--help"]
    # Before the command existed, every command stopped what it had started at its exit.
    available = subprocess.run(asked, env=ours, capture_output=True).returncode == 0

    def stop() -> None:
        if available:
            run([str(BIN / "orchestrator"), *parts, "stop"], ours)

    return stop


def wait_warm(ours: dict[str, str]) -> None:
    """Until the warm process the first `ask` started listens (where the command has one)."""
    deadline = time.monotonic() + 120
    status = [str(BIN / "orchestrator"), "warm", "status"]
    while time.monotonic() < deadline:
        done = subprocess.run(status, env=ours, capture_output=True, text=True)
        if done.returncode != 0 or done.stdout.startswith("running"):
            return
        time.sleep(0.2)
    raise ProcessFailed("the warm process did not start")


def paired(
    name: str,
    ours: Callable[[], float],
    llm: Callable[[], float],
    pairs: int,
    *,
    before: Callable[[], None] = lambda: None,
) -> dict[str, float]:
    """Ours ÷ llm, alternated (the order too), median of `pairs` paired ratios."""
    ratios, our_times, llm_times = [], [], []
    for number in range(pairs):
        if number % 2 == 0:
            before()
            our_times.append(ours())
            llm_times.append(llm())
        else:
            llm_times.append(llm())
            before()
            our_times.append(ours())
        ratios.append(our_times[-1] / llm_times[-1])
    median_ours, median_llm = statistics.median(our_times), statistics.median(llm_times)
    figures = {
        f"{name}_vs_llm": round(statistics.median(ratios), 2),
        f"{name}_s": round(median_ours, 3),
        f"{name}_llm_s": round(median_llm, 3),
    }
    print(
        f"{name}: {median_ours:.3f} s, llm {median_llm:.3f} s; "
        f"median of {pairs} paired ratios {figures[f'{name}_vs_llm']}",
        flush=True,
    )
    return figures


async def mcp_ready(ours: dict[str, str]) -> float:
    """Seconds from starting `orchestrator mcp serve` to its first `tools/list` answered."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(command=str(BIN / "orchestrator"), args=["mcp", "serve"], env=ours)
    with open(os.devnull, "w") as quiet:
        started = time.perf_counter()
        async with (
            stdio_client(server, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            elapsed = time.perf_counter() - started
    if not any(tool.name.startswith("noop") for tool in tools.tools):
        raise ProcessFailed(f"mcp serve did not offer the no-op action: {[t.name for t in tools.tools]}")
    return elapsed


def mcp_serve(ours: dict[str, str], runs: int, *, key: str = "mcp_serve_ready_s") -> dict[str, float]:
    times = [asyncio.run(mcp_ready(ours)) for _ in range(runs)]
    ready = round(statistics.median(times), 3)
    print(f"{key}: first tools/list answered after {ready} s, median of {runs}", flush=True)
    return {key: ready}


def profile(ours: dict[str, str]) -> None:
    """Where one `ask`'s time goes: the costliest imports, and the embedded server's start and stop."""
    args = [sys.executable, "-X", "importtime", "-m", "orchestrator", "ask", PROMPT]
    done = subprocess.run(args, env=ours, capture_output=True, text=True, timeout=300)
    costs: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, module = (part.strip() for part in line.split(":", 1)[1].split("|"))
            costs.append((int(cumulative), module))
    print("ask: the 15 costliest imports (cumulative, ms):")
    for microseconds, module in sorted(costs, reverse=True)[:15]:
        print(f"  {microseconds / 1000:8.1f}  {module}")
    joined = (
        "import sys, time; from pathlib import Path\n"
        "from orchestrator.store.embedded import embedded_logins, leave_embedded_server\n"
        "t = time.perf_counter(); embedded_logins(Path(sys.argv[1]))\n"
        "s = time.perf_counter(); leave_embedded_server(Path(sys.argv[1]))\n"
        "print(f'{s - t:.3f} {time.perf_counter() - s:.3f}')\n"
    )
    data = str(Path(ours["ORCHESTRATOR_HOME"]) / "data")
    done = subprocess.run([sys.executable, "-c", joined, data], env=ours, capture_output=True, text=True)
    start, _, stop = done.stdout.strip().partition(" ")
    print(f"embedded PostgreSQL: joined (started if not running) {start} s, left {stop} s", flush=True)


def measure(options: argparse.Namespace, home: Path) -> dict[str, float]:
    """Every figure, with the scripted server running and the database left stopped."""
    with OpenAICompatibleServer([ANSWER] * 100_000) as server:
        ours, llm = environments(home, server.base_url)
        long_way = ours | {"ORCHESTRATOR_WARM_MINUTES": "0"}
        prepare(ours)
        stop, stop_warm = stopper(ours, "db"), stopper(ours, "warm")

        def ask() -> float:
            return run(OURS_ASK, ours, expect=ANSWER)

        def ask_long_way() -> float:
            return run(OURS_ASK, long_way, expect=ANSWER)

        def ask_llm() -> float:
            return run(LLM, llm, expect=ANSWER)

        def noop() -> float:
            return run(OURS_RUN, ours, expect='"success": true')

        try:
            if options.mcp_only:
                noop()  # bytecode caches, migrations, the manifest, the warm process: not measured
                wait_warm(ours)
                return mcp_serve(ours, options.mcp_runs) | mcp_serve(
                    long_way, options.mcp_runs, key="mcp_serve_long_ready_s"
                )
            ask()  # bytecode caches, migrations, the warm process: not measured
            wait_warm(ours)
            ask_llm()
            if options.profile:
                profile(long_way)
            figures = paired("ask", ask, ask_llm, options.pairs)
            figures |= paired("run", noop, ask_llm, options.pairs)
            figures |= paired("long_ask", ask_long_way, ask_llm, options.pairs)
            figures |= paired("cold_ask", ask_long_way, ask_llm, options.pairs, before=stop)
            figures |= mcp_serve(ours, options.mcp_runs)
            return figures | mcp_serve(long_way, options.mcp_runs, key="mcp_serve_long_ready_s")
        finally:
            stop_warm()
            stop()  # before its data directory goes


def main() -> None:
    parser = argparse.ArgumentParser(description="Whole commands against simonw/llm.")
    parser.add_argument("--pairs", type=int, default=15, help="paired runs per ratio (at least 15)")
    parser.add_argument("--mcp-runs", type=int, default=5, help="starts of mcp serve timed")
    parser.add_argument("--profile", action="store_true", help="where an ask's time goes")
    parser.add_argument("--mcp-only", action="store_true", help="mcp_serve_ready_s alone")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as directory:
        try:
            figures = measure(options, Path(directory))
        except ProcessFailed as error:
            raise SystemExit(f"bench_cli: {error}") from None
    names = ("ask_vs_llm", "run_vs_llm", "long_ask_vs_llm", "cold_ask_vs_llm", "mcp_serve_ready_s", "mcp_serve_long_ready_s")
    print(json.dumps({**{name: figures[name] for name in names if name in figures}, **figures}))


if __name__ == "__main__":
    main()
