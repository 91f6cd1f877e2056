"""Discovery and loading of tool folders: good ones load, bad ones are skipped with a reason."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from orchestrator.folders.discovery import content_hash, discover, discover_tree, walk
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel
from tests.tool_folders import ECHO_TOOL, marker_code, write_folder

GOOD = {"name": "good", "description": "A good tool.", "version": "1.0"}

# Folders whose problem shows without importing anything: (directory, config, code, reason).
BAD_CONFIGS = [
    ("bad_yaml", "name: [unclosed\n", ECHO_TOOL, "invalid YAML"),
    ("not_mapping", "- just\n- a list\n", ECHO_TOOL, "expected a mapping"),
    ("no_description", {"name": "no_description", "version": "1"}, ECHO_TOOL, "description: Field required"),
    ("bad_timeout", {**GOOD, "name": "bad_timeout", "timeout_seconds": "soon"}, ECHO_TOOL, "timeout_seconds"),
    ("typo_field", {**GOOD, "name": "typo_field", "descripton": "x"}, ECHO_TOOL, "descripton: Extra inputs"),
    ("bad_name", {**GOOD, "name": "Bad Name"}, ECHO_TOOL, "name: String should match pattern"),
    ("escaping", {**GOOD, "name": "escaping", "entry_point": "../x.py"}, ECHO_TOOL, "relative .py path"),
    ("local_llm", {**GOOD, "name": "local_llm", "llm": {"inherit": "local"}}, ECHO_TOOL, "`model` is required"),
]

# Folders that pass discovery but fail when imported after approval.
BROKEN_CODE = {
    "syntax_error": ("def broken(:\n", "failed to import: SyntaxError"),
    "raises": ("raise RuntimeError('no network here')\n", "failed to import: RuntimeError: no network here"),
    "no_class": ("X = 1\n", "exactly one Tool subclass (found: none)"),
    "two_classes": (
        ECHO_TOOL + "\nclass Other(Echo):\n    pass\n",
        "exactly one Tool subclass (found: Echo, Other)",
    ),
    "no_actions": (
        "from orchestrator.tools import Tool\nclass Quiet(Tool):\n    pass\n",
        "declares no actions",
    ),
}


def test_valid_folders_are_found_with_their_config(tmp_path: Path):
    write_folder(tmp_path, "echo")
    write_folder(
        tmp_path, "other", config={**GOOD, "name": "other", "entry_point": "main.py"}, entry="main.py"
    )
    (tmp_path / "not_a_tool").mkdir()

    found = discover(tmp_path)

    assert [n.folder.name for n in found.nodes] == ["echo", "other"]
    assert found.problems == []
    assert found.nodes[1].folder.config.entry_file == "main.py"


@pytest.mark.parametrize(("directory", "config", "code", "reason"), BAD_CONFIGS)
def test_bad_config_is_skipped_with_its_reason(tmp_path: Path, directory, config, code, reason):
    write_folder(tmp_path, "echo")
    write_folder(tmp_path, directory, config=config, code=code)

    found = discover(tmp_path)

    assert [n.folder.name for n in found.nodes] == ["echo"]
    [problem] = found.problems
    assert problem.path == tmp_path / directory
    assert reason in problem.reason


def test_missing_entry_point_and_duplicate_name_are_skipped(tmp_path: Path):
    write_folder(tmp_path, "a_echo", config={**GOOD, "name": "echo"}, entry="echo_tool.py")
    write_folder(tmp_path, "b_echo", config={**GOOD, "name": "echo"}, entry="echo_tool.py")
    write_folder(tmp_path, "lost", config={**GOOD, "name": "lost"}, entry="elsewhere.py")

    found = discover(tmp_path)

    # Neither was decided on: neither is used, and one line names both (issue 27, item 5).
    assert [n.folder.key for n in found.nodes] == []
    reasons = {p.path.name: p.reason for p in found.problems}
    assert "the tool name 'echo' is also that of" in reasons["a_echo"]
    assert "/b_echo" in reasons["a_echo"] and "b_echo" not in reasons
    assert reasons["lost"] == "entry point lost_tool.py not found"


def test_startup_continues_past_every_kind_of_bad_folder(tmp_path: Path, caplog):
    root = tmp_path / "sub_graphs"
    write_folder(root, "echo")
    for directory, config, code, _ in BAD_CONFIGS:
        write_folder(root, directory, config=config, code=code)
    for directory, (code, _) in BROKEN_CODE.items():
        write_folder(root, directory, code=code)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")

    with caplog.at_level(logging.WARNING):
        runtime = Orchestrator.create(settings, model=ScriptedChatModel(), ask=lambda folder, status: True)

    assert [t.name for t in runtime.tools] == ["current_time", "calculator", "ask_human", "request_authorization", "echo_say"]
    warnings = "\n".join(r.getMessage() for r in caplog.records)
    for directory, (_, reason) in BROKEN_CODE.items():
        assert f"{root / directory}: " in warnings and reason in warnings, directory
    for directory, *_ in BAD_CONFIGS:
        assert str(root / directory) in warnings, directory


def test_tree_has_nested_folders_with_keys_and_depth(tmp_path: Path):
    write_folder(tmp_path, "parent")
    write_folder(tmp_path, "parent/src/sub_graphs/child")
    write_folder(tmp_path, "parent/src/sub_graphs/child/src/sub_graphs/grandchild")

    tree = discover_tree(tmp_path)

    assert [(n.folder.key, n.folder.depth) for n in walk(tree.nodes)] == [
        ("parent", 0),
        ("parent/src/sub_graphs/child", 1),
        ("parent/src/sub_graphs/child/src/sub_graphs/grandchild", 2),
    ]


def test_content_hash_follows_files_but_not_caches_or_sub_tools(tmp_path: Path):
    folder = write_folder(tmp_path, "echo")
    before = content_hash(folder)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "echo_tool.cpython-311.pyc").write_bytes(b"cache")
    write_folder(tmp_path, "echo/src/sub_graphs/child")
    assert content_hash(folder) == before

    (folder / "notes.txt").write_text("a new file")
    assert content_hash(folder) != before


def test_discovery_never_imports(tmp_path: Path):
    marker = tmp_path / "imported"
    write_folder(tmp_path / "sub_graphs", "spy", code=marker_code(marker))

    discover_tree(tmp_path / "sub_graphs")

    assert not marker.exists()
