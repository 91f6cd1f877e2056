"""Issue 47, item 4: `chat --server` and `ask --server`, the terminal chat as a client of
`orchestrator serve` — the parts that need no server: reading a run's stream, rebuilding
its `TurnResult`, and the one-line errors."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.cli.server_client.turn import RemoteTurn, turn_result
from orchestrator.conversation.turns import PendingQuestion, ToolCallRecord, TurnResult
from orchestrator.events import Stage, ToolPhase
from orchestrator.tools.hitl import Question
from orchestrator.usage.budget import BudgetStop
from orchestrator.usage.meter import UsageMeter
from orchestrator.usage.tokens import TokenCount
from tests.helpers import run_cli

KEY = {"ORCHESTRATOR_API_KEY": "a-key"}
QUESTION = Question(
    kind="approval",
    request_id="req-1",
    agent_path=["mailer"],
    action={"name": "send_email", "args": {"to": "a@b.c"}, "description": "Send it"},
    allowed=["approve", "edit", "reject"],
    why="send_email needs your approval",
    risk_level="high",
    urgency="normal",
)


def a_result(*, questions: list[PendingQuestion] | None = None) -> TurnResult:
    meter = UsageMeter()
    meter.add_model("priced-model", TokenCount(input=10, output=4, cached_input=2), 0.0021, seconds=0.5)
    meter.add_model("unpriced-model", TokenCount(input=3, output=1), None, seconds=0.25)
    meter.add_tool("search", None)
    return TurnResult(
        answer="" if questions else "Done.",
        answer_id=None,
        iterations=2,
        tool_calls=[ToolCallRecord("search", {"q": "x"}, "success", request_id="r1")],
        questions=questions or [],
        usage=meter.turn,
        budget_stop=BudgetStop(budget="ORCHESTRATOR_MAX_TURN_COST_USD", limit_usd=0.01, spent_usd=0.02, scope="turn"),
        compacted={"saved_tokens": 12, "failed": False},
    )


def test_a_turn_result_rebuilt_from_its_json_gives_the_same_json():
    for original in (a_result(), a_result(questions=[PendingQuestion("q1", QUESTION)])):
        body = original.to_json()
        assert turn_result(body).to_json() == body


def test_the_open_questions_are_the_interrupts_own_questions_whole():
    body = a_result(questions=[PendingQuestion("q1", QUESTION)]).to_json()
    whole = turn_result(body, interrupts=[{"id": "q1", "value": QUESTION}])
    assert whole.questions == [PendingQuestion("q1", QUESTION)]
    # Without the interrupt (an older server), what the JSON says is enough to answer it.
    told = turn_result(body).questions[0]
    assert told.id == "q1" and told.question["allowed"] == ["approve", "edit", "reject"]
    assert told.question["action"]["args"] == {"to": "a@b.c"} and told.question.get("risk_level") == "high"


def test_a_streamed_run_makes_the_events_chat_shows_and_its_result():
    turn = RemoteTurn()
    body = a_result().to_json()
    parts = [
        ("metadata", {"run_id": "run-1", "attempt": 1}),
        ("custom", {"kind": "status", "stage": "streaming", "detail": "", "at": "2026-01-01T00:00:00Z"}),
        ("messages", [{"type": "AIMessageChunk", "content": "Do", "id": "m1"}, {"langgraph_node": "model"}]),
        ("messages", [{"type": "AIMessageChunk", "content": [{"type": "text", "text": "ne."}], "id": "m1"}, {"langgraph_node": "model"}]),
        # a tool's own message and a sub-agent's reply are not the orchestrator's answer
        ("messages", [{"type": "tool", "content": "result", "id": "t1", "tool_call_id": "c1"}, {"langgraph_node": "tools"}]),
        ("custom", {"kind": "tool", "phase": "completed", "tool": "search", "index": 1, "total": 1,
                    "request_id": "r1", "parent_request_id": None, "status": "success", "depth": 1}),
        ("custom", {"kind": "tool", "phase": "warp"}),  # an event this terminal cannot show
        ("updates", {"tools": {"messages": [{"type": "tool", "content": "found", "id": "t1", "tool_call_id": "c1"}]}}),
        ("updates", {"model": {"messages": [{"type": "ai", "content": "Done.", "id": "m1"}]}}),
        ("custom", {"kind": "turn_result", **body}),
        ("end", None),
    ]
    events = [event for name, data in parts if (event := turn.feed(name, data)) is not None]

    assert turn.run_id == "run-1"
    assert [e["kind"] for e in events] == ["status", "token", "token", "tool"]
    assert events[0]["kind"] == "status" and events[0]["stage"] is Stage.STREAMING
    assert [e["text"] for e in events if e["kind"] == "token"] == ["Do", "ne."]
    assert events[3]["kind"] == "tool" and events[3]["phase"] is ToolPhase.COMPLETED and events[3]["depth"] == 1
    result = turn.result()
    assert result.answer == "Done." and result.answer_id == "m1"  # what was streamed is not printed again
    assert result.to_json() == body


def test_a_paused_run_gives_its_questions_whole_and_a_whole_reply_is_a_token():
    turn = RemoteTurn()
    body = a_result(questions=[PendingQuestion("q1", QUESTION)]).to_json()
    # a model that does not stream sends its reply whole, as an `ai` message
    token = turn.feed("messages", [{"type": "ai", "content": "Let me send it.", "id": "m1"}, {"langgraph_node": "model"}])
    turn.feed("updates", {"__interrupt__": [{"id": "q1", "value": QUESTION}]})
    turn.feed("custom", {"kind": "turn_result", **body})

    assert token == {"kind": "token", "text": "Let me send it.", "message_id": "m1"}
    assert turn.result().questions == [PendingQuestion("q1", QUESTION)]


def test_a_stream_that_ends_without_a_result_is_an_error():
    from orchestrator.errors import UserError

    turn = RemoteTurn()
    turn.feed("metadata", {"run_id": "r"})
    with pytest.raises(UserError, match="without its result"):
        turn.result()


# --- one line for the person --------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.parametrize("command", [["ask", "hello"], ["ask", "--json", "hello"], ["chat"]])
def test_a_server_that_is_down_is_one_line(tmp_path: Path, command: list[str]):
    url = f"http://127.0.0.1:{closed_port()}"
    result = run_cli(*command, "--server", url, cwd=tmp_path, env=KEY)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: cannot reach the server at {url} (All connection attempts failed); "
        "is `orchestrator serve` running there?"
    ), result.stderr
    if "--json" in command:  # `ask --json` still prints its one object, with the error
        import json

        said = json.loads(result.stdout)
        assert said["answer"] is None and said["error"].startswith("cannot reach the server")


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["chat", "--resume"], "error: --resume cannot go with --server: it needs the orchestrator running on this machine"),
        (["chat", "--user", "bob"], "error: --user cannot go with --server: the server knows who you are from your API key"),
        (["ask", "-u", "bob", "hi"], "error: --user cannot go with --server: the server knows who you are from your API key"),
        (["ask", "--no-cache", "hi"], "error: --no-cache cannot go with --server: it needs the orchestrator running on this machine"),
    ],
)
def test_local_only_flags_with_server_are_one_line(tmp_path: Path, flags: list[str], line: str):
    result = run_cli(*flags, "--server", "http://127.0.0.1:9", cwd=tmp_path, env=KEY)
    assert result.returncode == 1
    assert result.stderr.strip() == line


def test_no_key_and_a_bad_url_are_one_line(tmp_path: Path):
    no_key = run_cli("ask", "hi", "--server", "http://127.0.0.1:9", cwd=tmp_path, env={"ORCHESTRATOR_API_KEY": ""})
    assert no_key.returncode == 1
    assert no_key.stderr.strip() == "error: set ORCHESTRATOR_API_KEY to the key `orchestrator users key NAME` gave you"
    bad_url = run_cli("chat", "--server", "127.0.0.1:8000", cwd=tmp_path, env=KEY)
    assert bad_url.returncode == 1
    assert bad_url.stderr.strip() == "error: --server takes the server's http:// or https:// URL, not '127.0.0.1:8000'"


class _NotTheApi(BaseHTTPRequestHandler):
    """A web page at every address, whatever is asked, with the status the test names."""

    status = 200

    def do_POST(self) -> None:  # noqa: N802  # the standard library's name
        page = b"<html>hello</html>"
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  # quiet
        return


@pytest.mark.parametrize("status", [200, 404, 501])
def test_a_url_where_something_else_answers_is_one_line(tmp_path: Path, status: int):
    handler = type("Answers", (_NotTheApi,), {"status": status})
    web = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{web.server_address[1]}"
    try:
        result = run_cli("ask", "hi", "--server", url, cwd=tmp_path, env=KEY)
    finally:
        web.shutdown()
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: what answers at {url} is not an `orchestrator serve` (it answered {status}, not the API's JSON)"
    )
