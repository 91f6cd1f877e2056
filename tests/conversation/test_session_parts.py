"""`Session` is a front over named parts, each small enough to read whole.

The parts share the graph's thread of the conversation: running a turn and
reading its stream, the archive, follow-ups and the questions a turn waits on.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import orchestrator.conversation as conversation
from orchestrator import Session

PACKAGE = Path(conversation.__file__).parent
PARTS = ("thread", "turn_run", "cancelled", "lookup", "archive", "follow_ups", "pending")
MOST_LINES = 210  # "about 200"


@pytest.mark.parametrize("part", PARTS)
def test_each_part_of_the_session_stays_small(part: str):
    lines = (PACKAGE / f"{part}.py").read_text().count("\n")
    assert lines <= MOST_LINES, f"conversation/{part}.py has {lines} lines"


def test_the_session_is_a_front_of_public_methods_over_its_parts():
    tree = ast.parse((PACKAGE / "session.py").read_text())
    [front] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Session"]
    assert front.end_lineno is not None
    assert front.end_lineno - front.lineno <= 200, "the front only hands on to its parts"
    private = [
        node.name
        for node in front.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("_")
    ]
    assert sorted(private) == ["__init__", "_claim", "_holding", "_result", "_turn_with"]


def test_the_public_session_api_is_unchanged():
    public = sorted(name for name in vars(Session) if not name.startswith("_"))
    assert public == [
        "answer", "config", "context", "deliver", "follow_up", "history", "keep_summary",
        "last_turn", "open", "pending", "plan", "resume", "run",
    ]
    assert list(inspect.signature(Session).parameters) == [
        "graph", "settings", "user_id", "session_id", "storage", "jobs", "authorizations",
    ]
