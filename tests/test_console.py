"""The turn renderer: streamed answers once, unstreamed ones printed, tool lines by depth."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.cli.render import TurnRenderer
from orchestrator.events import Stage, ToolPhase
from orchestrator.session import TurnResult


def renderer() -> tuple[TurnRenderer, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    plain = {"force_terminal": False, "width": 200}
    return TurnRenderer(out=Console(file=out, **plain), err=Console(file=err, **plain)), out, err


def tool_event(tool: str, depth: int) -> dict[str, object]:
    return {
        "kind": "tool", "phase": ToolPhase.COMPLETED, "tool": tool, "index": 1, "total": 1,
        "request_id": "r", "parent_request_id": None, "status": "success", "depth": depth,
    }


def test_streamed_answer_is_printed_once():
    render, out, _ = renderer()
    for text in ("The ", "answer."):
        render({"kind": "token", "text": text, "message_id": "m1"})
    render({"kind": "status", "stage": Stage.COMPLETE, "detail": ""})
    render.finish(TurnResult(answer="The answer.", answer_id="m1", iterations=1))
    assert out.getvalue() == "The answer.\n"


def test_answer_that_was_not_streamed_is_printed_on_its_own_line():
    render, out, _ = renderer()
    render({"kind": "token", "text": "Let me check.", "message_id": "m1"})
    render.finish(TurnResult(answer="I stopped after 5 rounds.", answer_id="m2", iterations=6))
    assert out.getvalue() == "Let me check.\nI stopped after 5 rounds.\n"


def test_tool_lines_are_indented_by_depth():
    render, _, err = renderer()
    render(tool_event("assistant_ask", 0))  # type: ignore[arg-type]
    render(tool_event("task_add", 1))  # type: ignore[arg-type]
    assert err.getvalue().splitlines() == [
        "  tool assistant_ask (1/1): success",
        "    tool task_add (1/1): success",
    ]


def test_failure_is_one_line_on_stderr():
    render, out, err = renderer()
    render.fail("Cannot reach the model server [at] x")
    assert out.getvalue() == ""
    assert err.getvalue() == "error: Cannot reach the model server [at] x\n"
