"""Questions for the person: on a terminal asked again until clear, piped lines never lost."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from orchestrator.folders.approvals import LATER, Status
from orchestrator.folders.discovery import ToolFolder, discover
from orchestrator.terminal.tty_questions import ApprovalPrompt, Terminal
from tests.tool_folders import write_folder


def folder(tmp_path: Path, description: str = "Echoes text.") -> ToolFolder:
    write_folder(tmp_path, "echo", config={"name": "echo", "description": description, "version": "1.0"})
    return discover(tmp_path).nodes[0].folder


def screen() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_on_a_terminal_an_unclear_answer_is_asked_again(tmp_path: Path):
    shows = io.StringIO()
    prompt = ApprovalPrompt(err=screen(), terminal=Terminal(io.StringIO("maybe\ny\n"), shows))
    assert prompt(folder(tmp_path), Status.NEW) is True
    assert "Please answer y or n, not 'maybe'." in shows.getvalue()
    assert prompt.leftover == []


def test_ctrl_d_on_a_terminal_stops_the_questions(tmp_path: Path):
    prompt = ApprovalPrompt(err=screen(), terminal=Terminal(io.StringIO(""), io.StringIO()))
    assert prompt(folder(tmp_path), Status.NEW) is None


def test_piped_answers_and_a_line_that_is_not_one(tmp_path: Path):
    echo = folder(tmp_path)
    prompt = ApprovalPrompt(err=screen(), stdin=io.StringIO("y\nn\n\nwhat is 2+2?\n"), keep_messages=True)
    # An empty line is no answer, not a no: nothing is remembered (issue 27, item 17).
    assert [prompt(echo, Status.NEW) for _ in range(3)] == [True, False, LATER]
    assert prompt(echo, Status.NEW) is None, "not an answer: undecided"
    assert prompt.leftover == ["what is 2+2?"], "and kept for the chat"
    assert prompt(echo, Status.NEW) is None, "end of input"


def test_escape_sequences_in_a_description_are_shown_not_obeyed(tmp_path: Path):
    err = screen()
    prompt = ApprovalPrompt(err=err, stdin=io.StringIO("n\n"))
    prompt(folder(tmp_path, description="Harmless\x1b[2K\x1b[1A [red]x[/red]"), Status.NEW)
    shown = err.file.getvalue()
    assert "\x1b" not in shown
    assert "Harmless\\x1b[2K\\x1b[1A [red]x[/red]" in shown


def test_piped_to_ask_an_unclear_answer_is_asked_again(tmp_path: Path):
    err = screen()
    prompt = ApprovalPrompt(err=err, stdin=io.StringIO("maybe\ny\n"))
    assert prompt(folder(tmp_path), Status.NEW) is True
    assert "Please answer y or n, not 'maybe'." in err.file.getvalue()
    assert prompt.leftover == []
