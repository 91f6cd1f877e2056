"""Startup time with many approved tool folders, and beside a minimal LangChain loader.

    .venv/bin/python scripts/bench_discovery.py [--sizes 10 100 1000]
        [--loader-size 1000] [--rounds 5]

For each size, generates that many approved folders (each a tool_config.yaml and
a two-action tool), then, in a fresh process, times `Orchestrator.create` from start
to ready: discovery, hashing, the approval check, importing every entry point,
building the LangChain tools and compiling the graph. Python's own start and
the library imports, the same for every size, are printed apart.

Then, with `--loader-size` folders, in one fresh process (libraries imported
first, one untimed round of each), alternately, `--rounds` times (which goes
first alternates too):
- ours: `Orchestrator.create` as above (every entry point imported again from the
  hashed sources, as the product always does);
- a minimal LangChain loader over the same folders: for each, read its
  tool_config.yaml (yaml.safe_load), import its entry point (importlib, a
  fresh module name each round; Python's bytecode cache, in a directory of
  this run, serves it after the first round), build a `StructuredTool` per
  action (the action's own parameter model as the schema) and bind them all
  to the same offline model, which turns them into OpenAI tool schemas.

Last line, one JSON object: seconds_10, seconds_100, seconds_1000 (time to
ready in a fresh process), growth_100_to_1000 (seconds_1000 / seconds_100;
10.0 is linear), and vs_loader_ratio (ours / the loader's time to ready,
median of the paired ratios) with loader_folders, the size it was measured at.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
imported = time.perf_counter()
settings = load_settings(sub_graphs_dir=sys.argv[1], data_dir=sys.argv[2])
runtime = Orchestrator.create(settings, model=OfflineChatModel(), ask=lambda folder, status: None)
ready = time.perf_counter()
generated = [t for t in runtime.tools if t.name.startswith("tool_")]
print(json.dumps({"tools": len(generated), "import_s": imported - started, "ready_s": ready - imported}))
"""


PAIRED = """
import gc, importlib.util, json, sys, time
from pathlib import Path
# The loader's bytecode cache; ours keeps this prefix and writes no bytecode for folders.
sys.pycache_prefix = sys.argv[4]
import yaml
from langchain_core.tools import StructuredTool
from orchestrator.llm import OfflineChatModel
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.tools import Tool

sub_graphs, data, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
model = OfflineChatModel()


def ours(round_number):
    settings = load_settings(sub_graphs_dir=sub_graphs, data_dir=data)
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: None)
    return sum(1 for t in runtime.tools if t.name.startswith("tool_"))  # the built-ins left out


def action_tool(tool, spec):
    async def run(**parameters):
        return await spec.handler(tool, spec.params(**parameters), None)

    return StructuredTool.from_function(
        coroutine=run,
        name=f"{tool.name}_{spec.name}",
        description=spec.description,
        args_schema=spec.params,
    )


def loader(round_number):
    tools = []
    for folder in sorted(sub_graphs.iterdir()):
        config = yaml.safe_load((folder / "tool_config.yaml").read_text())
        name = f"langchain_loader_{round_number}_{folder.name}"
        spec = importlib.util.spec_from_file_location(name, folder / f"{config['name']}_tool.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        found = next(
            v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, Tool) and v is not Tool
        )
        tool = found(**{k: config[k] for k in ("name", "description", "version", "capabilities")})
        tools.extend(action_tool(tool, spec) for spec in found.actions.values())
    model.bind_tools(tools)
    return len(tools)


def timed(load, round_number):
    # Earlier rounds' objects frozen: the collector does not walk them in this one, as in a fresh process.
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    count = load(round_number)
    elapsed = time.perf_counter() - started
    gc.unfreeze()
    return elapsed, count


ours(-1), loader(-1)  # warm: the loader's bytecode written, caches filled
seconds, tools = {"ours": [], "loader": []}, {}
for round_number in range(rounds):
    order = [("ours", ours), ("loader", loader)]
    for name, load in order if round_number % 2 == 0 else order[::-1]:
        elapsed, tools[name] = timed(load, round_number)
        seconds[name].append(elapsed)
    for module in [m for m in sys.modules if m.startswith("langchain_loader_")]:
        del sys.modules[module]
print(json.dumps({"seconds": seconds, "tools": tools}))
"""


def generate(root: Path, count: int) -> None:
    from orchestrator.folders.approvals import ApprovalStore
    from orchestrator.folders.discovery import discover_tree
    from orchestrator.settings import load_settings

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


def versus_loader(root: Path, rounds: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Ours and the minimal LangChain loader over the same folders, alternately, in one process.

    Each one's seconds to ready by round, and how many generated tools each built.
    """
    done = subprocess.run(
        [sys.executable, "-c", PAIRED, str(root / "sub_graphs"), str(root / "data"), str(rounds),
         str(root / "pycache")],
        capture_output=True, text=True, check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["seconds"], result["tools"]


def loader_ratio(size: int, rounds: int) -> float:
    """Ours / the minimal LangChain loader with `size` folders: median of the paired ratios."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        generate(root, size)
        seconds, tools = versus_loader(root, rounds)
    assert tools["ours"] == tools["loader"] == 2 * size, tools
    ratios = [ours / loader for ours, loader in zip(seconds["ours"], seconds["loader"], strict=True)]
    print(
        f"{size:5d} folders, ours beside a minimal LangChain loader: ready in "
        f"{statistics.median(seconds['ours']):.3f}s, "
        f"the loader {statistics.median(seconds['loader']):.3f}s "
        f"(medians of {rounds}, alternated; ratios {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    return statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--loader-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    sizes = options.sizes
    figures: dict[str, float] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory)
            generate(root, size)
            started = time.perf_counter()
            result = measure(root)
            wall = time.perf_counter() - started
        assert result["tools"] == 2 * size, result  # two actions each
        print(
            f"{size:5d} folders: ready in {result['ready_s']:.3f}s "
            f"(+ {result['import_s']:.2f}s importing the libraries; process {wall:.2f}s)"
        )
        figures[f"seconds_{size}"] = round(result["ready_s"], 3)
    if {"seconds_100", "seconds_1000"} <= figures.keys():
        figures["growth_100_to_1000"] = round(figures["seconds_1000"] / figures["seconds_100"], 2)
    figures["vs_loader_ratio"] = round(loader_ratio(options.loader_size, options.rounds), 3)
    figures["loader_folders"] = options.loader_size
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
