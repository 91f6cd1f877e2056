"""How fast the quick commands start, against the floor of any typer + rich command.

Each figure is a ratio of medians, measured alternately in fresh processes:
`orchestrator --help`, `--version` and `tools list` (over the shipped folders)
against a yardstick, a typer app that imports rich and pydantic-settings and
prints its help. A ratio near 1 means the command loads nothing it does not need
(LangChain and LangGraph alone used to cost several seconds).

    .venv/bin/python scripts/bench_startup.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 7
YARDSTICK = """
import typer, rich.console, pydantic_settings
app = typer.Typer()
@app.command()
def hello() -> None:
    "Say hello."
app()
"""
COMMANDS = {"help": ["--help"], "version": ["--version"], "tools_list": ["tools", "list"]}


def elapsed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as home:
        print(json.dumps(measure(Path(home))))


def measure(home: Path) -> dict[str, float]:
    """The ratios (and the yardstick's median) for commands run with `home` as their home."""
    env = {**os.environ, "ORCHESTRATOR_HOME": str(home)}
    env["ORCHESTRATOR_SUB_GRAPHS_DIR"] = str(Path(__file__).resolve().parents[1] / "sub_graphs")
    yardstick = [sys.executable, "-c", YARDSTICK, "--help"]
    times: dict[str, list[float]] = {name: [] for name in [*COMMANDS, "yardstick"]}
    for _ in range(ROUNDS):
        for name, args in COMMANDS.items():
            times["yardstick"].append(elapsed(yardstick, env))
            times[name].append(elapsed([sys.executable, "-m", "orchestrator", *args], env))
    floor = statistics.median(times["yardstick"])
    figures = {f"{name}_ratio": round(statistics.median(times[name]) / floor, 2) for name in COMMANDS}
    figures["yardstick_s"] = round(floor, 3)
    return figures


if __name__ == "__main__":
    main()
