"""Startup time with many approved tool folders, and beside a minimal LangChain loader.

    .venv/bin/python scripts/bench_discovery.py [--sizes 10 100 1000 5000] [--rounds 3]
        [--warm-size 1000] [--loader-size 1000] [--loader-rounds 5] [--plot FILE.png]
        [--warm-only]

For each size, generates that many approved folders (each a tool_config.yaml and
a two-action tool), then, in a fresh process, times `Orchestrator.create` from start
to ready: discovery, hashing, the approval check, importing every entry point,
building the LangChain tools and compiling the graph. Python's own start and
the library imports, the same for every size, are printed apart. Each is a
first start (the compiled approved code of earlier starts deleted, see
`folders.code_cache`); beside it, in a fresh process too, the minimal LangChain
loader below over the same folders (its bytecode cache kept, as Python does).
The sizes are measured `--rounds` times, in turn (the order alternating), and
each figure is a median. The user data directory is one of this run's.

Warm start: with `--warm-size` folders, `--rounds` times, a first start (the
compiled code deleted) then a second with nothing changed, each in a fresh process.

Then, with `--loader-size` folders, in one fresh process (libraries imported
first, one untimed round of each), alternately, `--loader-rounds` times (which
goes first alternates too):
- ours: `Orchestrator.create` as above (every folder hashed again, its entry
  point imported from the hashed sources), the folders' tool manifests deleted
  first, so that every folder is imported as at a first start;
- ours, warm: `Orchestrator.create` with the manifests the round before wrote
  (every folder hashed again, none imported: see `sources.deferred`);
- a minimal LangChain loader over the same folders: for each, read its
  tool_config.yaml (yaml.safe_load), import its entry point (importlib, a
  fresh module name each round; Python's bytecode cache, in a directory of
  this run, serves it after the first round), build a `StructuredTool` per
  action (the action's own parameter model as the schema) and bind them all
  to the same offline model, which turns them into OpenAI tool schemas.

`--plot FILE.png` draws time to ready against the number of folders, ours and the loader's.

Last line, one JSON object: seconds_N and loader_seconds_N for each size N
(median time to ready in a fresh process), growth_100_to_1000 and
growth_1000_to_5000 (ours at the larger ÷ at the smaller; linear is the ratio
of the sizes), warm_start_ratio (second start ÷ first, median of the rounds'
ratios) with warm_folders, and vs_loader_ratio (ours / the loader's time to
ready, median of the paired ratios) and vs_loader_warm_ratio (ours, warm / the
loader's) with loader_folders, the size they were measured at. `--warm-only`
measures the warm start alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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


LOADER = """
import gc, importlib.util, json, sys, time
from pathlib import Path
# The loader's bytecode cache; ours keeps this prefix and writes no bytecode for folders.
sys.pycache_prefix = sys.argv[4]
started = time.perf_counter()
import yaml
from langchain_core.tools import StructuredTool
from orchestrator.llm import OfflineChatModel
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.tools import Tool
imported = time.perf_counter()

sub_graphs, data, rounds = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
model = OfflineChatModel()


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
"""

# The loader alone in a fresh process, as MEASURE does ours.
LOADER_ALONE = LOADER + """
count = loader(0)
ready = time.perf_counter()
print(json.dumps({"tools": count, "import_s": imported - started, "ready_s": ready - imported}))
"""

PAIRED = LOADER + """
import shutil
from orchestrator.paths import user_data_dir
from orchestrator.sources.manifest import MANIFEST_DIR, wait_for_manifests


def ours(round_number):
    shutil.rmtree(user_data_dir() / MANIFEST_DIR, ignore_errors=True)  # every folder imported
    return ours_warm(round_number)


def ours_warm(round_number):
    settings = load_settings(sub_graphs_dir=sub_graphs, data_dir=data)
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: None)
    return sum(1 for t in runtime.tools if t.name.startswith("tool_"))  # the built-ins left out


def timed(load, round_number):
    # Earlier rounds' objects frozen: the collector does not walk them in this one, as in a fresh process.
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    count = load(round_number)
    elapsed = time.perf_counter() - started
    wait_for_manifests()  # written after ready: done before the next round, not during it
    gc.unfreeze()
    return elapsed, count


ours(-1), loader(-1)  # warm: the loader's bytecode written, caches filled
seconds, tools = {"ours": [], "loader": [], "ours_warm": []}, {}
for round_number in range(rounds):
    order = [("ours", ours), ("loader", loader), ("ours_warm", ours_warm)]
    for name, load in order if round_number % 2 == 0 else order[::-1]:
        elapsed, tools[name] = timed(load, round_number)
        seconds[name].append(elapsed)
    for module in [m for m in sys.modules if m.startswith("langchain_loader_")]:
        del sys.modules[module]
print(json.dumps({"seconds": seconds, "tools": tools}))
"""


def generate(root: Path, count: int) -> None:
    """`count` tool folders in `root/sub_graphs`, approved (in `root/data`) as they are."""
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
    store.decide_all([node.folder for node in discover_tree(sub_graphs).nodes], approved=True)


def run_script(script: str, *arguments: object) -> dict:
    """Run `script` in a fresh Python; the JSON object its last line prints."""
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def forget_compiled_code() -> None:
    """Delete what earlier starts kept (the approved code compiled, the folders' tool
    manifests): the next start is a first one."""
    from orchestrator.folders.code_cache import CACHE_DIR
    from orchestrator.paths import user_data_dir
    from orchestrator.sources.manifest import MANIFEST_DIR

    shutil.rmtree(user_data_dir() / CACHE_DIR, ignore_errors=True)
    shutil.rmtree(user_data_dir() / MANIFEST_DIR, ignore_errors=True)


def first_start(root: Path) -> dict:
    forget_compiled_code()
    return run_script(MEASURE, root / "sub_graphs", root / "data")


def loader_alone(root: Path) -> dict:
    return run_script(LOADER_ALONE, root / "sub_graphs", root / "data", 1, root / "pycache")


def by_size(roots: dict[int, Path], rounds: int) -> tuple[dict[int, float], dict[int, float]]:
    """Median time to ready by size, ours (a first start) and the loader's, sizes taken in turn."""
    ours: dict[int, list[float]] = {size: [] for size in roots}
    loader: dict[int, list[float]] = {size: [] for size in roots}
    sizes = list(roots)
    for round_number in range(rounds):
        for size in sizes if round_number % 2 == 0 else sizes[::-1]:
            result, peer = first_start(roots[size]), loader_alone(roots[size])
            assert result["tools"] == peer["tools"] == 2 * size, (result, peer)  # two actions each
            ours[size].append(result["ready_s"])
            loader[size].append(peer["ready_s"])
            print(
                f"{size:5d} folders: ready in {result['ready_s']:.3f}s "
                f"(+ {result['import_s']:.2f}s importing the libraries); "
                f"the loader {peer['ready_s']:.3f}s",
                flush=True,
            )
    median = statistics.median
    return {k: median(v) for k, v in ours.items()}, {k: median(v) for k, v in loader.items()}


def warm_ratio(root: Path, size: int, rounds: int) -> float:
    """A second start with nothing changed ÷ the first: median of `rounds` pairs."""
    ratios = []
    for _ in range(rounds):
        first = first_start(root)["ready_s"]
        second = run_script(MEASURE, root / "sub_graphs", root / "data")["ready_s"]
        ratios.append(second / first)
        print(f"{size:5d} folders: first start {first:.3f}s, second {second:.3f}s", flush=True)
    return statistics.median(ratios)


def loader_ratio(root: Path, size: int, rounds: int) -> tuple[float, float]:
    """Ours / the minimal LangChain loader with `size` folders: median of the paired ratios;
    then ours, warm (the manifests kept) / the loader."""
    result = run_script(PAIRED, root / "sub_graphs", root / "data", rounds, root / "pycache-paired")
    seconds, tools = result["seconds"], result["tools"]
    assert tools["ours"] == tools["loader"] == tools["ours_warm"] == 2 * size, tools
    ratios = {
        name: [ours / loader for ours, loader in zip(seconds[name], seconds["loader"], strict=True)]
        for name in ("ours", "ours_warm")
    }
    print(
        f"{size:5d} folders, ours beside a minimal LangChain loader: ready in "
        f"{statistics.median(seconds['ours']):.3f}s (warm: "
        f"{statistics.median(seconds['ours_warm']):.3f}s), "
        f"the loader {statistics.median(seconds['loader']):.3f}s "
        f"(medians of {rounds}, alternated; ratios "
        f"{', '.join(f'{r:.2f}' for r in ratios['ours'])}; warm "
        f"{', '.join(f'{r:.2f}' for r in ratios['ours_warm'])})"
    )
    return statistics.median(ratios["ours"]), statistics.median(ratios["ours_warm"])


def growth(figures: dict[str, float], small: int, large: int) -> None:
    if {f"seconds_{small}", f"seconds_{large}"} <= figures.keys():
        ratio = figures[f"seconds_{large}"] / figures[f"seconds_{small}"]
        figures[f"growth_{small}_to_{large}"] = round(ratio, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm-size", type=int, default=1000)
    parser.add_argument("--loader-size", type=int, default=1000)
    parser.add_argument("--loader-rounds", type=int, default=5)
    parser.add_argument("--plot", type=Path, help="draw time to ready against folders in this PNG")
    parser.add_argument(
        "--warm-only", action="store_true", help="measure the warm start alone (warm_start_ratio)"
    )
    options = parser.parse_args()
    if options.warm_only:
        options.sizes, options.loader_size = [], options.warm_size
    with tempfile.TemporaryDirectory() as directory:
        # A user data directory of this run: its installation key, its compiled code.
        os.environ["XDG_DATA_HOME"] = str(Path(directory) / "user-data")
        sizes = sorted({*options.sizes, options.warm_size, options.loader_size})
        roots = {size: Path(directory) / str(size) for size in sizes}
        for size, root in roots.items():
            generate(root, size)
        ours, loader = by_size({size: roots[size] for size in options.sizes}, options.rounds)
        figures: dict[str, float] = {}
        for size in options.sizes:
            figures[f"seconds_{size}"] = round(ours[size], 3)
            figures[f"loader_seconds_{size}"] = round(loader[size], 3)
        growth(figures, 100, 1000)
        growth(figures, 1000, 5000)
        warm = warm_ratio(roots[options.warm_size], options.warm_size, options.rounds)
        figures["warm_start_ratio"] = round(warm, 3)
        figures["warm_folders"] = options.warm_size
        if not options.warm_only:
            paired, warm_paired = loader_ratio(
                roots[options.loader_size], options.loader_size, options.loader_rounds
            )
            figures["vs_loader_ratio"] = round(paired, 3)
            figures["vs_loader_warm_ratio"] = round(warm_paired, 3)
            figures["loader_folders"] = options.loader_size
    if options.plot is not None:
        plot(options.plot, options.sizes, ours, loader)
    print(json.dumps(figures))


def plot(path: Path, sizes: list[int], ours: dict[int, float], loader: dict[int, float]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from plot import plot_curves

    plot_curves(
        path,
        title="Time to ready against tool folders (first start)",
        sizes=sizes,
        series={
            "ours (Orchestrator.create)": [ours[size] for size in sizes],
            "minimal LangChain loader": [loader[size] for size in sizes],
        },
        xlabel="approved tool folders",
        ylabel="seconds to ready",
    )


if __name__ == "__main__":
    main()
