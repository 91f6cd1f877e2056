"""Writing tool folders for tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from orchestrator.folders.approvals import ApprovalStore, Status
from orchestrator.folders.discovery import ToolFolder, discover_tree, walk
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings
from orchestrator.testing import ScriptedChatModel

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "sub_graphs"

ECHO_TOOL = '''
from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class SayParams(BaseModel):
    text: str = Field(description="What to repeat.")
    times: int = Field(default=1, ge=1, le=5)


class Echo(Tool):
    @action(SayParams)
    async def say(self, params: SayParams, request: ToolRequest) -> ToolResult:
        """Repeat the text."""
        return request.result(" ".join([params.text] * params.times))
'''


# Tool code that must take a while waits for a gate file the test writes when it
# has seen what it waits for, never for a sleep guessed long enough. Bounded, so a
# test that never opens the gate fails instead of hanging. No braces: tool code
# that uses it goes through str.format.
WAIT_FOR_GATE = """

async def wait_for(gate: Path) -> None:
    \"\"\"Return once the test has written `gate` (two minutes at most).\"\"\"
    for _ in range(6000):
        if gate.exists():
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("the test never opened " + str(gate))
"""

GATED_TOOL = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

STARTED = Path({started!r})
GATE = Path({gate!r})


class Nothing(BaseModel):
    pass


class Gated(Tool):
    @action(Nothing)
    async def run(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Run once the gate opens.\"\"\"
        STARTED.write_text(request.request_id)
        await wait_for(GATE)
        return request.result("ran to the end")
""" + WAIT_FOR_GATE


def write_folder(
    root: Path,
    directory: str,
    *,
    config: dict[str, object] | str | None = None,
    code: str = ECHO_TOOL,
    entry: str | None = None,
    isolation: str | None = "inline",
) -> Path:
    """A tool folder `root/directory` with a config (dict, raw YAML text, or a default) and code.

    A folder not shipped runs in a held process by default; the tests that write
    folders here are about what surrounds a folder's code, and their code runs
    inline (it writes markers where the test says, asks the person, uses the
    database), so a config given as a dict, or the default one, says
    `isolation: inline` unless it has a `sandbox:` of its own. `isolation=None`
    leaves the default (tests/sandbox tests the held process).
    """
    folder = root / directory
    folder.mkdir(parents=True)
    name = directory.rsplit("/", 1)[-1]
    if config is None:
        config = {"name": name, "description": f"The {name} tool.", "version": "1.0"}
    if isinstance(config, dict) and isolation is not None and "sandbox" not in config:
        config = {**config, "sandbox": {"isolation": isolation}}
    text = config if isinstance(config, str) else yaml.safe_dump(config)
    (folder / "tool_config.yaml").write_text(text)
    (folder / (entry or f"{name}_tool.py")).write_text(code)
    return folder


AGENT_TOOL = "from orchestrator.tools import AgentTool\n\nclass {name}(AgentTool):\n    pass\n"


def three_levels(root: Path, *, leaf_config: dict[str, object] | None = None, leaf_code: str = ECHO_TOOL) -> None:
    """Agent `top` over agent `mid` over the tool `leaf` (`leaf_say`)."""
    write_folder(root, "top", code=AGENT_TOOL.format(name="Top"))
    write_folder(root, "top/src/sub_graphs/mid", code=AGENT_TOOL.format(name="Mid"))
    write_folder(root, "top/src/sub_graphs/mid/src/sub_graphs/leaf", config=leaf_config, code=leaf_code)


def marker_code(marker: Path) -> str:
    """Echo tool code that leaves `marker` behind when it is imported."""
    return f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n" + ECHO_TOOL


def copy_shipped(destination: Path, *, repo: Path = REPO) -> Path:
    """The shipped sub_graphs/ folders, copied into `destination`: not folders a user added there."""
    for name in shipped_files(repo):
        source = repo / name
        if source.is_file():  # a shipped file the user deleted is not made up
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination / "sub_graphs"


def shipped_files(repo: Path = REPO) -> list[Path]:
    """sub_graphs/'s files that the repository tracks (`git ls-files`), relative to `repo`.

    Outside a git checkout (an unpacked release) every file there came with it.
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", "sub_graphs"], cwd=repo, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        files = (path for path in (repo / "sub_graphs").rglob("*") if path.is_file())
        return [path.relative_to(repo) for path in files if "__pycache__" not in path.parts]
    return [Path(name) for name in listed.decode().split("\0") if name]


# Tool folders of the hardening tests: runs counted, output on every level,
# a thread left running, an attempt to end the process.

COUNTED_TOOL = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

RUNS = Path({runs!r})
STARTED = Path({started!r})
GATE = Path({gate!r})


class Nothing(BaseModel):
    pass


class Counted(Tool):
    @action(Nothing)
    async def run(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Count the run, then finish once the gate opens.\"\"\"
        with RUNS.open("a") as runs:
            runs.write(request.request_id + "\\n")
        STARTED.write_text(request.request_id)
        await wait_for(GATE)
        return request.result("ran to the end")
""" + WAIT_FOR_GATE

NOISY_TOOL = """
import os
import subprocess
import sys

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Nothing(BaseModel):
    pass


class Noisy(Tool):
    @action(Nothing)
    async def run(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Print on every level there is.\"\"\"
        print("noise from print")
        sys.stdout.flush()
        os.write(1, b"noise from file descriptor 1\\n")
        subprocess.run(["echo", "noise from a child process"], check=True)
        return request.result("printed")
"""

LINGERING_TOOL = """
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

GATE = Path({gate!r})
DONE = Path({done!r})


class Nothing(BaseModel):
    pass


def linger() -> None:
    for _ in range(600):  # 30 s at most: the test never opens the gate before the exit
        if GATE.exists():
            break
        time.sleep(0.05)
    DONE.write_text("the thread ran to its end")


class Lingering(Tool):
    @action(Nothing)
    async def run(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Leave a thread running.\"\"\"
        threading.Thread(target=linger, name="lingering").start()
        return request.result("started a thread")
"""

QUITTER_TOOL = """
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Nothing(BaseModel):
    pass


class Quitter(Tool):
    @action(Nothing)
    async def run(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Try to end the process.\"\"\"
        raise SystemExit(7)
"""

# A tool with three actions for a turn that calls them all at once: `a` ends at
# once; `b` and `c` leave a marker named after themselves in the started
# directory, then wait for the gate. Every run is counted as `name request_id`.
TRIO_TOOL = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

RUNS = Path({runs!r})
STARTED = Path({started!r})
GATE = Path({gate!r})


class Nothing(BaseModel):
    pass


def count(name: str, request: ToolRequest) -> None:
    with RUNS.open("a") as runs:
        runs.write(name + " " + request.request_id + "\\n")


async def gated(name: str, request: ToolRequest) -> ToolResult:
    count(name, request)
    STARTED.mkdir(parents=True, exist_ok=True)
    (STARTED / name).write_text(request.request_id)
    await wait_for(GATE)
    return request.result(name + " ran to the end")


class Trio(Tool):
    @action(Nothing)
    async def a(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Count the run and end at once.\"\"\"
        count("a", request)
        return request.result("a ran to the end")

    @action(Nothing)
    async def b(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Count the run, then end once the gate opens.\"\"\"
        return await gated("b", request)

    @action(Nothing)
    async def c(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Count the run, then end once the gate opens.\"\"\"
        return await gated("c", request)
""" + WAIT_FOR_GATE


def parrot_agent(root: Path, *, llm: dict[str, object] | None = None, **extra: object) -> None:
    """A YAML-only agent `parrot` over an echo tool (`echo_say`); on its own model if `llm` says;
    `extra` adds to its tool_config.yaml."""
    config: dict[str, object] = {
        "name": "parrot",
        "description": "Repeats things.",
        "version": "1.0",
        "kind": "agent",
        "instructions": "You are {name}. Repeat what you are asked to with your echo tool.",
    }
    if llm is not None:
        config["llm"] = llm
    config |= extra
    (root / "parrot").mkdir(parents=True)
    (root / "parrot" / "tool_config.yaml").write_text(yaml.safe_dump(config))
    write_folder(root, "parrot/src/sub_graphs/echo")


def approve_all(settings: Settings) -> None:
    """Approve every folder of the settings' sub_graphs directory as it is, sub-tools too."""
    store = ApprovalStore.of(settings)
    store.decide_all([node.folder for node in walk(discover_tree(settings.sub_graphs_dir).nodes)], approved=True)


def start_approved(settings: Settings, answers: list[Status] | None = None) -> Orchestrator:
    """A runtime of `settings`; a question about a folder fails the test unless `answers` collects it."""

    def ask(folder: ToolFolder, status: Status) -> bool:
        if answers is None:
            raise AssertionError(f"{folder.name} was asked about ({status}), but it is approved")
        answers.append(status)
        return True

    return Orchestrator.create(settings, model=ScriptedChatModel(), ask=ask)
