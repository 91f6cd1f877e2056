"""Approval under attack: no code runs without a fresh yes for exactly that code.

Each test plants something hostile in a tool folder, an approvals file or a
description, and checks that it is refused, asked about again, or shown escaped.
"""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import logging
import os
import py_compile
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from orchestrator.errors import ConfigError
from orchestrator.folders.approvals import ApprovalStore, Status, review_folders
from orchestrator.folders.discovery import ToolFolder, content_hash, discover, discover_tree, walk
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.sources.loaded import LoadedTool
from orchestrator.terminal.tty_questions import ApprovalPrompt
from orchestrator.testing import ScriptedChatModel
from orchestrator.tools import ToolRequest
from tests.helpers import run_cli
from tests.tool_folders import ECHO_TOOL, marker_code, write_folder

# A tool whose one action, `value`, reports `expression`, evaluated after `imports`.
VALUE_TOOL = """
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action
{imports}


class Nothing(BaseModel):
    pass


class Reporter(Tool):
    @action(Nothing)
    async def value(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Report the value.\"\"\"
        {body}
        return request.result(str({expression}))
"""


def value_tool(imports: str = "", expression: str = "VALUE", body: str = "pass") -> str:
    return VALUE_TOOL.format(imports=imports, expression=expression, body=body)


class Answers:
    """Scripted answers to the approval prompt (None: end of input), and a side effect."""

    def __init__(self, *answers: bool | None, on_ask=None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, Status]] = []
        self.on_ask = on_ask

    def __call__(self, folder: ToolFolder, status: Status) -> bool | None:
        self.asked.append((folder.name, status))
        if self.on_ask is not None:
            self.on_ask(folder)
        return self.answers.pop(0)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")


def start(settings: Settings, answers: Answers) -> list[LoadedTool]:
    return Orchestrator.create(settings, model=ScriptedChatModel(), ask=answers).sub_agents


def call_value(loaded: LoadedTool) -> str:
    request = ToolRequest(request_id="r1", action="value", parameters={})
    return asyncio.run(loaded.tool.execute(request)).message


def problems(directory: Path) -> dict[str, str]:
    return {p.path.name: p.reason for p in discover_tree(directory).problems}


def decide_all(settings: Settings, *, approved: bool = True) -> None:
    store = ApprovalStore.of(settings)
    for node in walk(discover_tree(settings.sub_graphs_dir).nodes):
        store.decide(node.folder, approved=approved)


def folder_named(settings: Settings, name: str) -> ToolFolder:
    nodes = walk(discover_tree(settings.sub_graphs_dir).nodes)
    return next(node.folder for node in nodes if node.folder.name == name)


# -- 1. Everything that can be imported or run is hashed, or the folder is refused --


def _link_out(folder: Path, outside: Path) -> None:
    (outside / "lib").mkdir(parents=True)
    (outside / "lib" / "helper.py").write_text("VALUE = 'outside'\n")
    (folder / "lib").symlink_to(outside / "lib", target_is_directory=True)


def _entry_through_link_out(folder: Path, outside: Path) -> None:
    (outside / "code").mkdir(parents=True)
    (outside / "code" / "main.py").write_text(ECHO_TOOL)
    (folder / "code").symlink_to(outside / "code", target_is_directory=True)
    config = yaml.safe_load((folder / "tool_config.yaml").read_text())
    config["entry_point"] = "code/main.py"
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))


def _file_link_out(folder: Path, outside: Path) -> None:
    outside.mkdir()
    (outside / "helper.py").write_text("VALUE = 'outside'\n")
    (folder / "helper.py").symlink_to(outside / "helper.py")


def _dev_zero(folder: Path, outside: Path) -> None:
    (folder / "data.bin").symlink_to("/dev/zero")


def _dangling(folder: Path, outside: Path) -> None:
    (folder / "gone.py").symlink_to(folder / "nowhere.py")


def _loop(folder: Path, outside: Path) -> None:
    (folder / "pkg").mkdir()
    (folder / "pkg" / "again").symlink_to(folder, target_is_directory=True)


def _fifo(folder: Path, outside: Path) -> None:
    os.mkfifo(folder / "pipe")


def _sourceless_bytecode(folder: Path, outside: Path) -> None:
    source = outside / "helper.py"
    outside.mkdir()
    source.write_text("VALUE = 'compiled'\n")
    py_compile.compile(str(source), cfile=str(folder / "helper.pyc"))


def _children_dir_out(folder: Path, outside: Path) -> None:
    (outside / "sub_graphs").mkdir(parents=True)
    (folder / "src").mkdir()
    (folder / "src" / "sub_graphs").symlink_to(outside / "sub_graphs", target_is_directory=True)


REFUSED = {
    "dir_link_out": (_link_out, "lib is a link leading out of the folder"),
    "entry_link_out": (_entry_through_link_out, "code is a link leading out of the folder"),
    "file_link_out": (_file_link_out, "helper.py is a link leading out of the folder"),
    "dev_zero": (_dev_zero, "data.bin is a link leading out of the folder"),
    "dangling": (_dangling, "gone.py is a link to nothing"),
    "loop": (_loop, "pkg/again is a link to a directory that contains it"),
    "fifo": (_fifo, "pipe is a FIFO"),
    "pyc": (_sourceless_bytecode, "helper.pyc is compiled Python without its source"),
    "children_out": (_children_dir_out, "src/sub_graphs is a link leading out of the folder"),
}


@pytest.mark.parametrize("plant", list(REFUSED))
def test_what_cannot_be_hashed_is_refused_with_a_reason(tmp_path: Path, plant: str):
    root = tmp_path / "sub_graphs"
    write_folder(root, "good")
    plant_it, reason = REFUSED[plant]
    plant_it(write_folder(root, "hostile"), tmp_path / "outside")

    found = discover(root)

    assert [n.folder.name for n in found.nodes] == ["good"]
    [problem] = found.problems
    assert reason in problem.reason


def test_startup_skips_hostile_folders_each_with_one_clear_line(settings, tmp_path, caplog):
    write_folder(settings.sub_graphs_dir, "good")
    for plant, (plant_it, _) in REFUSED.items():
        plant_it(write_folder(settings.sub_graphs_dir, plant), tmp_path / f"outside-{plant}")

    with caplog.at_level(logging.WARNING):
        loaded = start(settings, Answers(True))

    assert [t.folder.name for t in loaded] == ["good"]
    lines = [r.getMessage() for r in caplog.records if "skipping tool folder" in r.getMessage()]
    for plant, (_, reason) in REFUSED.items():
        [line] = [line for line in lines if f"sub_graphs/{plant}:" in line]
        assert reason in line


EXTRA_FILES = {
    "node_modules": "node_modules/lib/index.js",
    "plain dir in src/sub_graphs": "src/sub_graphs/plain/mod.py",
    "bytecode beside its source": "helper.pyc",
}


@pytest.mark.parametrize("where", list(EXTRA_FILES))
def test_a_change_anywhere_that_could_run_changes_the_hash(tmp_path: Path, where: str):
    folder = write_folder(tmp_path, "echo")
    (folder / "helper.py").write_text("VALUE = 1\n")
    target = folder / EXTRA_FILES[where]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("first")
    before = content_hash(folder)

    target.write_text("second")

    assert content_hash(folder) != before


def test_a_folder_with_git_and_a_venv_is_loaded_and_kept_approved(settings: Settings):
    folder = write_folder(settings.sub_graphs_dir, "echo")
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "python").symlink_to(sys.executable)  # links out of the folder
    (folder / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "index").write_bytes(b"first")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "index.js").write_text("first")
    assert [n.folder.name for n in discover(settings.sub_graphs_dir).nodes] == ["echo"]
    [loaded] = start(settings, Answers(True))

    (folder / ".git" / "index").write_bytes(b"rewritten by git status")
    (folder / ".venv" / "pyvenv.cfg").write_text("home = /opt/python\n")
    again = Answers()
    assert len(start(settings, again)) == 1
    assert again.asked == []

    (folder / "node_modules" / "index.js").write_text("second")  # still covered
    changed = Answers(None)
    assert start(settings, changed) == []
    assert changed.asked == [("echo", Status.CHANGED)]


def test_a_child_linked_to_its_own_folder_is_refused(settings: Settings):
    write_folder(settings.sub_graphs_dir, "echo")
    loop = settings.sub_graphs_dir / "echo" / "src" / "sub_graphs" / "again"
    loop.parent.mkdir(parents=True)
    loop.symlink_to("../..", target_is_directory=True)  # a folder inside itself, over and over

    found = discover_tree(settings.sub_graphs_dir)

    assert [n.folder.key for n in walk(found.nodes)] == ["echo"]
    [problem] = found.problems
    assert problem.path == loop
    assert "would hold itself" in problem.reason
    answers = Answers(True)
    assert len(start(settings, answers)) == 1
    assert answers.asked == [("echo", Status.NEW)]


def test_a_link_inside_the_folder_is_followed(tmp_path: Path):
    folder = write_folder(tmp_path, "echo")
    (folder / "real").mkdir()
    (folder / "real" / "helper.py").write_text("VALUE = 1\n")
    (folder / "alias").symlink_to(folder / "real", target_is_directory=True)
    before = content_hash(folder)
    [node] = discover(tmp_path).nodes
    assert {"real/helper.py", "alias/helper.py"} <= set(node.folder.sources)

    (folder / "real" / "helper.py").write_text("VALUE = 2\n")

    assert content_hash(folder) != before


def test_stale_bytecode_in_pycache_is_never_imported(settings: Settings, tmp_path: Path):
    folder = write_folder(
        settings.sub_graphs_dir, "reporter", code=value_tool("from .helper import VALUE")
    )
    (folder / "helper.py").write_text("VALUE = 'from source'\n")
    other = tmp_path / "other.py"
    other.write_text("VALUE = 'from bytecode'\n")
    py_compile.compile(
        str(other),
        cfile=importlib.util.cache_from_source(str(folder / "helper.py")),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )

    [loaded] = start(settings, Answers(True))

    assert call_value(loaded) == "from source"


OWN_PATH_IMPORT = """
import os
import sys
sys.path.insert(0, os.path.dirname(__file__))
import stale_bytecode_helper  # noqa: E402
"""


def test_stale_bytecode_beside_a_module_on_the_tools_own_path_is_not_run(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(sys, "pycache_prefix", None)  # as a process started without one
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    folder = write_folder(
        settings.sub_graphs_dir,
        "reporter",
        code=value_tool(OWN_PATH_IMPORT, expression="stale_bytecode_helper.VALUE"),
    )
    (folder / "stale_bytecode_helper.py").write_text("VALUE = 'from source'\n")
    other = tmp_path / "other.py"
    other.write_text("VALUE = 'from bytecode'\n")
    tag = sys.implementation.cache_tag
    py_compile.compile(
        str(other),
        cfile=str(folder / "__pycache__" / f"stale_bytecode_helper.{tag}.pyc"),
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    try:
        [loaded] = start(settings, Answers(True))
        assert call_value(loaded) == "from source"
    finally:
        sys.modules.pop("stale_bytecode_helper", None)
    private = tmp_path / "user-data" / "orchestrator" / "pycache"
    assert sys.pycache_prefix == os.environ["PYTHONPYCACHEPREFIX"] == str(private)
    assert stat.S_IMODE(private.stat().st_mode) == 0o700


def test_loading_writes_no_bytecode_into_the_folder(settings: Settings):
    folder = write_folder(
        settings.sub_graphs_dir, "reporter", code=value_tool("from .helper import VALUE")
    )
    (folder / "helper.py").write_text("VALUE = 1\n")

    [loaded] = start(settings, Answers(True))

    assert call_value(loaded) == "1"
    assert not list(folder.rglob("__pycache__"))


CHILD_IMPORT = "from .src.sub_graphs.child import helper\nVALUE = helper.VALUE"


@pytest.mark.parametrize("child_answer", [False, True], ids=["denied", "approved"])
def test_a_parent_imports_only_approved_children(settings: Settings, tmp_path: Path, child_answer):
    marker = tmp_path / "child code ran"
    write_folder(settings.sub_graphs_dir, "parent", code=value_tool(CHILD_IMPORT))
    child = write_folder(settings.sub_graphs_dir, "parent/src/sub_graphs/child")
    (child / "helper.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\nVALUE = 'child'\n"
    )
    decide_all(settings)
    ApprovalStore.of(settings).decide(folder_named(settings, "child"), approved=child_answer)

    loaded = start(settings, Answers())

    if child_answer:
        [parent] = loaded
        assert call_value(parent) == "child"
    else:
        assert loaded == [], "the parent cannot import its denied child"
        assert not marker.exists()


def test_a_module_added_after_approval_cannot_be_imported(settings: Settings):
    folder = write_folder(
        settings.sub_graphs_dir,
        "reporter",
        code=value_tool(body="from . import late  # noqa", expression="late.VALUE"),
    )
    [loaded] = start(settings, Answers(True))

    (folder / "late.py").write_text("VALUE = 'unapproved'\n")

    assert "import name 'late'" in call_value_error(loaded)


def call_value_error(loaded: LoadedTool) -> str:
    try:
        return call_value(loaded)
    except ImportError as error:  # ModuleNotFoundError included
        return str(error)


# -- 2. What runs is what was shown --


def test_a_file_swapped_while_the_prompt_waits_is_asked_about_again(settings: Settings, tmp_path):
    marker = tmp_path / "swapped code ran"
    folder = write_folder(settings.sub_graphs_dir, "echo")

    def swap(_: ToolFolder) -> None:
        if len(answers.asked) == 1:  # while the first question waits
            (folder / "echo_tool.py").write_text(marker_code(marker))

    answers = Answers(True, False, on_ask=swap)
    loaded = start(settings, answers)

    assert answers.asked == [("echo", Status.NEW), ("echo", Status.CHANGED)]
    assert loaded == []
    assert not marker.exists()


@pytest.mark.parametrize("ending", ["input ends", "rounds run out"])
def test_a_yes_for_a_folder_that_changed_meanwhile_approves_no_content(
    settings: Settings, tmp_path: Path, ending: str
):
    marker = tmp_path / "evil code ran"
    evil, benign = marker_code(marker), ECHO_TOOL
    folder = write_folder(settings.sub_graphs_dir, "echo", code=evil)
    entry = folder / "echo_tool.py"

    def swap(_: ToolFolder) -> None:  # what is on disk flips while each question waits
        if ending == "rounds run out" or len(answers.asked) == 1:
            entry.write_text(benign if entry.read_text() == evil else evil)

    replies = (True, None) if ending == "input ends" else (True, True, True)
    answers = Answers(*replies, on_ask=swap)
    assert start(settings, answers) == []
    entry.write_text(evil)  # what was on disk when it was first scanned

    again = Answers(None)
    assert start(settings, again) == []
    assert again.asked == [("echo", Status.NEW)]
    assert not marker.exists()


def test_code_changed_after_the_questions_is_not_what_runs(settings: Settings, tmp_path: Path):
    marker = tmp_path / "swapped code ran"
    folder = write_folder(settings.sub_graphs_dir, "echo")
    reviewed = review_folders(settings, Answers(True))

    (folder / "echo_tool.py").write_text(marker_code(marker))
    runtime = Orchestrator.create(settings, model=ScriptedChatModel(), reviewed=reviewed)

    assert [t.name for t in runtime.tools][-1] == "echo_say"
    assert not marker.exists()


# -- 3. Approvals are signed with this installation's key --


def _forge(settings: Settings, *, mac: str | None) -> None:
    store_file = ApprovalStore.of(settings).path
    folders = {}
    for node in walk(discover_tree(settings.sub_graphs_dir).nodes):
        folder = node.folder
        decision = {"name": folder.name, "version": "1.0", "digest": folder.digest}
        decision["approved"] = True
        folders[node.folder.key] = decision if mac is None else {**decision, "mac": mac}
    store_file.parent.mkdir(parents=True, exist_ok=True)
    store_file.write_text(json.dumps({"format": 1, "folders": folders}))


@pytest.mark.parametrize("mac", [None, "0" * 64], ids=["unsigned", "bad signature"])
def test_a_forged_approvals_file_approves_nothing(settings: Settings, tmp_path: Path, mac):
    marker = tmp_path / "imported"
    write_folder(settings.sub_graphs_dir, "spy", code=marker_code(marker))
    _forge(settings, mac=mac)

    answers = Answers(None)
    assert start(settings, answers) == []

    assert answers.asked == [("spy", Status.NEW)]
    assert not marker.exists()
    assert ApprovalStore.of(settings).unsigned() == 1  # said at startup, asked again until answered


def test_the_unsigned_warning_is_said_only_when_its_folders_are_asked_about_again(
    settings: Settings, caplog: pytest.LogCaptureFixture
):
    write_folder(settings.sub_graphs_dir, "echo")
    decide_all(settings)
    path = ApprovalStore.of(settings).path
    stored = json.loads(path.read_text())
    # Unsigned, but about no folder here: one removed since, or another sub_graphs directory's.
    stored["folders"]["gone"] = {"name": "gone", "version": "1.0", "digest": "0" * 64, "approved": True}
    path.write_text(json.dumps(stored))

    with caplog.at_level(logging.WARNING, logger="orchestrator.folders.approvals"):
        kept = review_folders(settings, Answers())
    quiet = [r.getMessage() for r in caplog.records if "not signed" in r.getMessage()]
    caplog.clear()
    del stored["folders"]["echo"]["mac"]
    path.write_text(json.dumps(stored))
    answers = Answers(True)
    with caplog.at_level(logging.WARNING, logger="orchestrator.folders.approvals"):
        asked = review_folders(settings, answers)
    said = [r.getMessage() for r in caplog.records if "not signed" in r.getMessage()]

    assert kept.approved == {"echo"} and quiet == [], "echo stays approved: nothing to say"
    assert answers.asked == [("echo", Status.NEW)] and asked.approved == {"echo"}
    assert said == [
        "1 stored tool decision(s) are not signed by this installation (made by an earlier "
        "version, or copied here): those folders are asked about again"
    ]


def test_approvals_copied_to_another_installation_count_as_new(tmp_path: Path):
    first = load_settings(sub_graphs_dir=tmp_path / "a/sub_graphs", data_dir=tmp_path / "a/data")
    write_folder(first.sub_graphs_dir, "echo")
    decide_all(first)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    second = load_settings(sub_graphs_dir=tmp_path / "b/sub_graphs", data_dir=tmp_path / "b/data")

    [folder] = [n.folder for n in discover_tree(second.sub_graphs_dir).nodes]

    assert ApprovalStore.of(second).status(folder) == Status.NEW
    assert ApprovalStore.of(first).status(discover_tree(first.sub_graphs_dir).nodes[0].folder) == (
        Status.APPROVED
    )


def test_a_home_with_its_own_approvals_is_not_trusted(tmp_path: Path):
    foreign = tmp_path / "downloaded"
    write_folder(foreign / "sub_graphs", "spy")
    (foreign / ".env").write_text("ORCHESTRATOR_LOG_LEVEL=INFO\n")
    settings = load_settings(sub_graphs_dir=foreign / "sub_graphs", data_dir=foreign / "data")
    _forge(settings, mac="1f" * 32)  # as signed with someone else's key

    home = {"ORCHESTRATOR_HOME": str(foreign)}
    listed = run_cli("tools", "list", "--json", cwd=tmp_path, env=home)

    assert listed.returncode == 0, listed.stderr
    assert [t["status"] for t in json.loads(listed.stdout)["tools"]] == ["new"]


def test_the_installation_key_is_private_and_kept(settings: Settings, tmp_path: Path):
    write_folder(settings.sub_graphs_dir, "echo")
    decide_all(settings)
    key = tmp_path / "user-data" / "orchestrator" / "approvals.key"

    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    content = key.read_bytes()
    [folder] = [n.folder for n in discover_tree(settings.sub_graphs_dir).nodes]
    assert ApprovalStore.of(settings).status(folder) == Status.APPROVED
    assert key.read_bytes() == content, "made once, then reused"

    key.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        ApprovalStore.of(settings).status(folder)


# -- 4. Bounded YAML and file reading --


def _laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


BOMBS = {
    "billion laughs": (_laughs(8), "expands to more than"),
    "half a million laughs": (_laughs(5), "expands to more than"),
    "alias in itself": ("a: &a [*a]\n", "an alias refers to a node that contains it"),
    "deep nesting": ("a: " + "[" * 100 + "]" * 100 + "\n", "nested more than"),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_yaml_bomb_in_config_is_refused(tmp_path: Path, bomb: str):
    text, reason = BOMBS[bomb]
    head = "name: bomb\ndescription: Boom.\nversion: '1'\nconfig:\n  "
    config = head + text.replace("\n", "\n  ")
    write_folder(tmp_path, "bomb", config=config)
    write_folder(tmp_path, "good")

    found = discover(tmp_path)

    assert [n.folder.name for n in found.nodes] == ["good"]
    assert reason in found.problems[0].reason


DEEP_NESTING_SCRIPT = """
import sys
from pathlib import Path
from orchestrator.folders.discovery import discover
found = discover(Path(sys.argv[1]))
print([n.folder.name for n in found.nodes], [p.reason for p in found.problems])
"""


@pytest.mark.process
def test_yaml_nested_too_deep_for_the_c_composer_is_refused_not_a_crash(tmp_path: Path):
    deep = "[" * 30_000 + "]" * 30_000  # 60 KB: libyaml's composer would recurse 30,000 times
    config = f"name: deep\ndescription: D.\nversion: '1'\nconfig:\n  a: {deep}\n"
    write_folder(tmp_path, "deep", config=config)
    write_folder(tmp_path, "good")

    # In a child process: on a crash, this one goes on to report it.
    done = subprocess.run(
        [sys.executable, "-c", DEEP_NESTING_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("['good'] ")
    # PyYAML 6.0.4 and later refuse such nesting in the scanner, before our own check
    refusals = ("nested more than 64 levels deep", "exceeded maximum nesting depth")
    assert any(refusal in done.stdout for refusal in refusals), done.stdout


def test_the_billion_laughs_is_small(tmp_path: Path):
    assert len(_laughs(8)) < 600


@pytest.mark.parametrize("make", ["fifo", "dev_zero", "huge"])
def test_a_config_that_is_not_a_small_file_is_refused(tmp_path: Path, make: str):
    folder = write_folder(tmp_path, "odd")
    config = folder / "tool_config.yaml"
    config.unlink()
    if make == "fifo":  # discovery ends although nothing ever writes to it
        os.mkfifo(config)
    elif make == "dev_zero":
        config.symlink_to("/dev/zero")
    else:
        config.write_text("name: odd\ndescription: Odd.\nversion: '1'\n# " + "x" * (2 << 20) + "\n")

    found = discover(tmp_path)

    assert found.nodes == []
    [problem] = found.problems
    assert ("larger than" if make == "huge" else "not a regular file") in problem.reason


def test_a_folder_too_large_to_hash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from orchestrator.folders import hashing

    monkeypatch.setattr(hashing, "MAX_BYTES", 4096)
    folder = write_folder(tmp_path, "big")
    (folder / "model.bin").write_bytes(b"\0" * 8192)

    assert "more than 4,096 bytes" in problems(tmp_path)["big"]


# -- 5. Untrusted text is shown escaped --

FORGED = "Harmless.\n  capabilities: none declared\n  path: sub_graphs/safe\x1b[8m\u202e"


def test_the_prompt_shows_each_part_of_a_folder_on_its_own_line(tmp_path: Path):
    config = {
        "name": "echo", "description": FORGED, "version": "1.0\x1b[2K",
        "capabilities": ["network\n  path: x", "files\x9b"],
    }
    write_folder(tmp_path, "echo\x1b[31m", config=config, entry="echo_tool.py")
    [node] = discover(tmp_path).nodes
    screen = Console(file=io.StringIO(), width=500)

    ApprovalPrompt(err=screen, stdin=io.StringIO("n\n"))(node.folder, Status.NEW)

    shown = screen.file.getvalue()
    assert not any(c in shown for c in "\x1b\x9b\u202e")
    lines = shown.strip("\n").splitlines()
    forged = "capabilities: none declared path: sub_graphs/safe\\x1b[8m\\u202e"
    assert lines[1] == f"  Harmless. {forged}", "the description is one line"
    assert lines[2] == "  capabilities: network\\n  path: x, files\\x9b"
    assert sum(line.startswith("  path:") for line in lines) == 1
    assert lines[3] == "  sandbox: none (isolation: inline): it runs with all you can reach"
    [path] = [line for line in lines if line.startswith("  path: ")]
    assert "echo\\x1b[31m" in path and lines.index(path) > 3


def test_tools_commands_show_folder_text_escaped(tmp_path: Path):
    config = {"name": "echo", "description": FORGED, "version": "1"}
    write_folder(tmp_path / "sub_graphs", "echo", config=config)
    write_folder(tmp_path / "sub_graphs", "bad\x1b[2J\nname", config="name: [unclosed\n")

    listed = run_cli("tools", "list", cwd=tmp_path)
    approved = run_cli("tools", "approve", "echo", cwd=tmp_path)
    missing = run_cli("tools", "approve", "no\x1b[2Jpe", cwd=tmp_path)

    for done in (listed, approved, missing):
        assert "\x1b" not in done.stdout + done.stderr and "\u202e" not in done.stdout + done.stderr
    assert len(listed.stdout.strip().splitlines()) == 2
    assert "skipped sub_graphs/bad\\x1b[2J\\nname: " in listed.stdout
    assert sum(line.startswith("  path:") for line in approved.stdout.splitlines()) == 1
    assert missing.stderr.count("\n") == 1 and "no\\x1b[2Jpe" in missing.stderr


def test_skipped_folders_are_logged_escaped(settings: Settings, caplog):
    write_folder(settings.sub_graphs_dir, "bad\x1b[2J", config="name: [unclosed\n")

    with caplog.at_level(logging.WARNING):
        review_folders(settings, Answers())

    [message] = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert "\x1b" not in message and "bad\\x1b[2J" in message


# -- 15. Smaller ones --


def test_folders_named_alike_do_not_share_modules(settings: Settings):
    for directory, value in (("ab-x", "dash"), ("ab_x", "underscore")):
        folder = write_folder(
            settings.sub_graphs_dir,
            directory,
            config={"name": f"tool_{value}", "description": "Reports.", "version": "1"},
            code=value_tool("from .helper import VALUE"),
            entry=f"tool_{value}_tool.py",
        )
        (folder / "helper.py").write_text(f"VALUE = {value!r}\n")

    loaded = start(settings, Answers(True, True))

    assert {t.folder.name: call_value(t) for t in loaded} == {
        "tool_dash": "dash", "tool_underscore": "underscore"
    }


def test_a_new_folder_does_not_knock_out_an_approved_one_of_the_same_name(settings: Settings):
    same = {"name": "echo", "description": "Echoes.", "version": "1"}
    write_folder(settings.sub_graphs_dir, "b_echo", config=same, entry="echo_tool.py")
    decide_all(settings)
    write_folder(settings.sub_graphs_dir, "a_echo", config=same, entry="echo_tool.py")

    answers = Answers()
    loaded = start(settings, answers)

    assert [t.folder.key for t in loaded] == ["b_echo"]
    assert answers.asked == []


@pytest.mark.parametrize("timeout", [".inf", "-.inf", ".nan", "-1", "0", "1e9"])
def test_a_timeout_must_be_finite_positive_and_sane(tmp_path: Path, timeout: str):
    config = f"name: slow\ndescription: Slow.\nversion: '1'\ntimeout_seconds: {timeout}\n"
    write_folder(tmp_path, "slow", config=config)

    assert "timeout_seconds" in problems(tmp_path)["slow"]


def test_a_long_but_sane_timeout_is_accepted(tmp_path: Path):
    config = "name: slow\ndescription: Slow.\nversion: '1'\ntimeout_seconds: 3600\n"
    write_folder(tmp_path, "slow", config=config)

    assert discover(tmp_path).nodes[0].folder.config.timeout_seconds == 3600
