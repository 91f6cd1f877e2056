"""Startup approval: nothing is imported or approved without an explicit yes."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.folders.approvals import ApprovalStore, Status
from orchestrator.folders.discovery import ToolFolder, discover_tree, walk
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.testing import ScriptedChatModel
from tests.tool_folders import marker_code, write_folder


class Answers:
    """Scripted answers to the approval prompt; None is the end of input."""

    def __init__(self, *answers: bool | None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, Status]] = []

    def __call__(self, folder: ToolFolder, status: Status) -> bool | None:
        self.asked.append((folder.name, status))
        return self.answers.pop(0)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")


def start(settings: Settings, answers: Answers) -> list[str]:
    """Start a runtime; the names of the tools the model gets from folders."""
    runtime = Orchestrator.create(settings, model=ScriptedChatModel(), ask=answers)
    return [t.name for loaded in runtime.sub_agents for t in loaded.langchain]


def test_approval_persists_and_a_change_asks_again(settings: Settings):
    folder = write_folder(settings.sub_graphs_dir, "echo")

    first = Answers(True)
    assert start(settings, first) == ["echo_say"]
    assert first.asked == [("echo", Status.NEW)]

    again = Answers()
    assert start(settings, again) == ["echo_say"]
    assert again.asked == []

    (folder / "echo_tool.py").write_text((folder / "echo_tool.py").read_text() + "\n# edited\n")
    changed = Answers(False)
    assert start(settings, changed) == []
    assert changed.asked == [("echo", Status.CHANGED)]


def test_a_no_is_remembered(settings: Settings):
    write_folder(settings.sub_graphs_dir, "echo")
    assert start(settings, Answers(False)) == []
    assert start(settings, Answers()) == []  # not asked again
    [folder] = _folders(settings)
    assert ApprovalStore.of(settings).status(folder) == Status.DENIED


@pytest.mark.parametrize("answer", [None, False], ids=["end of input", "no"])
def test_unapproved_code_is_never_imported(settings: Settings, tmp_path: Path, answer):
    marker = tmp_path / "imported"
    write_folder(settings.sub_graphs_dir, "spy", code=marker_code(marker))

    assert start(settings, Answers(answer)) == []
    assert not marker.exists()

    assert start(settings, Answers(True) if answer is None else Answers()) == (
        ["spy_say"] if answer is None else []
    )
    assert marker.exists() == (answer is None)


def test_end_of_input_decides_nothing_and_stops_asking(settings: Settings):
    write_folder(settings.sub_graphs_dir, "one")
    write_folder(settings.sub_graphs_dir, "two")

    answers = Answers(None)
    assert start(settings, answers) == []
    assert answers.asked == [("one", Status.NEW)], "after the input ended nothing more is asked"
    assert not ApprovalStore.of(settings).path.exists(), "nothing was decided"


def test_children_are_asked_only_under_an_approved_parent(settings: Settings):
    write_folder(settings.sub_graphs_dir, "parent")
    write_folder(settings.sub_graphs_dir, "parent/src/sub_graphs/child")

    refused = Answers(False)
    start(settings, refused)
    assert refused.asked == [("parent", Status.NEW)]

    store = ApprovalStore.of(settings)
    parent = next(f for f in _folders(settings) if f.name == "parent")
    store.decide(parent, approved=True)
    accepted = Answers(True)
    start(settings, accepted)
    assert accepted.asked == [("child", Status.NEW)]


def test_a_change_in_a_child_asks_about_the_child_only(settings: Settings):
    write_folder(settings.sub_graphs_dir, "parent")
    child = write_folder(settings.sub_graphs_dir, "parent/src/sub_graphs/child")
    start(settings, Answers(True, True))

    (child / "extra.py").write_text("VALUE = 1\n")
    answers = Answers(True)
    start(settings, answers)

    assert answers.asked == [("child", Status.CHANGED)]


def test_a_corrupt_store_is_a_config_error(settings: Settings):
    store = ApprovalStore.of(settings)
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{not json")
    with pytest.raises(ConfigError, match="Cannot read the tool approvals"):
        ApprovalStore.of(settings)


def _folders(settings: Settings) -> list[ToolFolder]:
    return [node.folder for node in walk(discover_tree(settings.sub_graphs_dir).nodes)]
