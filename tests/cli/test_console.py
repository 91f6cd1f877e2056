"""The turn renderer: streamed answers once, unstreamed ones printed, tool lines by depth."""

from __future__ import annotations

import io

from rich.console import Console

from orchestrator.conversation.session import TurnResult
from orchestrator.events import Stage, ToolPhase
from orchestrator.terminal.render import TurnRenderer


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


def test_escape_sequences_in_an_answer_are_shown_not_obeyed():
    render, out, _ = renderer()
    hostile = "Done.\x1b]0;pwned\x07\x1b[2J\rline\tand\nnext"
    render({"kind": "token", "text": hostile, "message_id": "m1"})
    render.finish(TurnResult(answer=hostile, answer_id="m1", iterations=1))
    shown = out.getvalue()
    assert "\x1b" not in shown and "\r" not in shown and "\x07" not in shown
    assert shown.startswith("Done.\\x1b]0;pwned\\x07\\x1b[2J\\rline") and shown.endswith("and\nnext\n")


def test_history_lines_are_short_and_escaped():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from orchestrator.cli.repl import describe_message

    said = describe_message(HumanMessage("\x1b[31mred [bold]x" + "y" * 10_000))
    assert "\x1b" not in said and "\\x1b[31mred \\[bold]x" in said and len(said) < 300
    called = describe_message(AIMessage("", tool_calls=[{"name": "n" * 100_000, "args": {}, "id": "c1"}]))
    assert len(called) < 300
    answered = describe_message(ToolMessage("ok", tool_call_id="c1", name="t\x1b[2J" * 1000))
    assert "\x1b" not in answered and len(answered) < 300
