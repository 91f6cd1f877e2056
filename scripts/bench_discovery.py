"""Startup time with many approved tool folders.

    .venv/bin/python scripts/bench_discovery.py [--sizes 10 100 1000]

For each size, generates that many approved folders (each a tool_config.yaml and
a two-action tool), then, in a fresh process, times `Runtime.create` from start
to ready: discovery, hashing, the approval check, importing every entry point,
building the LangChain tools and compiling the graph. Python's own start and
the library imports, the same for every size, are printed apart.

Last line, one JSON object: seconds_10, seconds_100, seconds_1000, and
growth_100_to_1000 (seconds_1000 / seconds_100; 10.0 is linear).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOL = '''
from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Lookup(BaseModel):
    key: str = Field(description="What to look up.")


class Store(BaseModel):
    key: str
    value: str


class Generated{index}(Tool):
    @action(Lookup)
    async def get(self, params: Lookup, request: ToolRequest) -> ToolResult:
        """Look a key up."""
        return request.result(params.key)

    @action(Store)
    async def put(self, params: Store, request: ToolRequest) -> ToolResult:
        """Store a value."""
        return request.result(params.value)
'''

CONFIG = """name: tool_{index}
description: Generated tool number {index} for the startup benchmark.
version: "1.0.{index}"
capabilities: [bench]
"""

MEASURE = """
import json, sys, time
started = time.perf_counter()
from orchestrator.llm import OfflineChatModel
from orchestrator.runtime import Runtime
from orchestrator.settings import load_settings
imported = time.perf_counter()
settings = load_settings(sub_graphs_dir=sys.argv[1], data_dir=sys.argv[2])
runtime = Runtime.create(settings, model=OfflineChatModel(), ask=lambda folder, status: None)
ready = time.perf_counter()
print(json.dumps({"tools": len(runtime.tools), "import_s": imported - started, "ready_s": ready - imported}))
"""


def generate(root: Path, count: int) -> None:
    from orchestrator.tools.approval import ApprovalStore
    from orchestrator.settings import load_settings
    from orchestrator.tools.discovery import discover_tree

    sub_graphs = root / "sub_graphs"
    for index in range(count):
        folder = sub_graphs / f"tool_{index}"
        folder.mkdir(parents=True)
        (folder / "tool_config.yaml").write_text(CONFIG.format(index=index))
        (folder / f"tool_{index}_tool.py").write_text(TOOL.format(index=index))
    settings = load_settings(sub_graphs_dir=sub_graphs, data_dir=root / "data")
    store = ApprovalStore.of(settings)
    for node in discover_tree(sub_graphs).nodes:
        store.decide(node.folder, approved=True)


def measure(root: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(root / "sub_graphs"), str(root / "data")],
        capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    sizes = parser.parse_args().sizes
    figures: dict[str, float] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory)
            generate(root, size)
            started = time.perf_counter()
            result = measure(root)
            wall = time.perf_counter() - started
        assert result["tools"] == 2 + 2 * size, result  # built-ins plus two actions each
        print(
            f"{size:5d} folders: ready in {result['ready_s']:.3f}s "
            f"(+ {result['import_s']:.2f}s importing the libraries; process {wall:.2f}s)"
        )
        figures[f"seconds_{size}"] = round(result["ready_s"], 3)
    if {"seconds_100", "seconds_1000"} <= figures.keys():
        figures["growth_100_to_1000"] = round(figures["seconds_1000"] / figures["seconds_100"], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
