"""Answering the person's questions: the session API, `chat`, `ask`, `/pending`, `requests show`.

The tools here ask with `hitl.ask_person` themselves (the approval gate and the
`ask_human` tool are tested with the core); what is shown here is how a paused
turn is answered: one line per question, all answers in one resume, durable
across processes, nothing approved unless the person typed it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from rich.console import Console

from orchestrator.conversation.session import PendingQuestion, QuestionsWaitingError
from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.terminal.answers import EditWanted, Unclear, read_arguments, read_choice
from orchestrator.terminal.lines import PipedLines
from orchestrator.terminal.questions import AnswerChannel, QuestionAsker
from orchestrator.terminal.signals import Interrupts
from orchestrator.testing import OpenAICompatibleServer, call_tools
from orchestrator.tools.hitl import Question, ask_person
from tests.helpers import make_session, server_env, start_and_kill
from tests.tool_folders import write_folder

# A tool folder `files` whose `tidy` asks the person first and `ask` asks them a
# question. Every entry is written to ENTERED, every file tidied to TIDIED. (No
# name here matches the approval gate's sensitive patterns: these tools ask themselves.)
ASKING_TOOL = '''
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.hitl import Question, ask_person

ENTERED = Path(ENTERED_PATH)
TIDIED = Path(TIDIED_PATH)


class Target(BaseModel):
    path: str


class Query(BaseModel):
    question: str


def note(path: Path, line: str) -> None:
    with path.open("a") as file:
        file.write(line + "\\n")


class Files(Tool):
    @action
    async def tidy(self, params: Target, request: ToolRequest) -> ToolResult:
        """Tidy a file away, once the person approves."""
        note(ENTERED, params.path)
        decision = ask_person(Question(
            kind="approval", request_id=request.request_id, agent_path=["files"],
            action={"name": "files_tidy", "args": params.model_dump()},
            allowed=["approve", "edit", "reject"], why="deleting is for the person to decide",
        ))
        if decision["type"] == "reject":
            return request.result("not tidied: " + decision.get("message", "rejected"))
        path = decision["edited_action"]["args"]["path"] if decision["type"] == "edit" else params.path
        note(TIDIED, path)
        return request.result("tidied " + path)

    @action
    async def ask(self, params: Query, request: ToolRequest) -> ToolResult:
        """Ask the person."""
        decision = ask_person(Question(
            kind="question", request_id=request.request_id, agent_path=["files"],
            action={"name": "ask_human", "args": {"question": params.question}},
            allowed=["respond", "reject"],
        ))
        return request.result("the person said: " + decision.get("message", "nothing"))
'''


def asking_folder(root: Path) -> tuple[Path, Path]:
    """The `files` folder under `root/sub_graphs`; its ENTERED and TIDIED logs."""
    entered, tidied = root / "entered", root / "tidied"
    code = ASKING_TOOL.replace("ENTERED_PATH", repr(str(entered))).replace("TIDIED_PATH", repr(str(tidied)))
    write_folder(root / "sub_graphs", "files", code=code)
    return entered, tidied


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def tool_replies(request: dict[str, object]) -> list[str]:
    """What the tool messages of one model request said."""
    return [
        json.loads(m["content"])["message"]
        for m in request["messages"]  # type: ignore[union-attr]
        if m["role"] == "tool"
    ]


# --- answers: one line each ---------------------------------------------------------------

APPROVAL = Question(
    kind="approval", request_id="r1", agent_path=[], action={"name": "files_tidy", "args": {"path": "a"}},
    allowed=["approve", "edit", "reject"],
)
AUTHORIZATION = Question(
    kind="authorization", request_id="r2", agent_path=[], action={"name": "pay", "args": {}},
    allowed=["approve", "reject"],
)
FREE = Question(
    kind="question", request_id="r3", agent_path=[], action={"name": "ask_human", "args": {}},
    allowed=["respond", "reject"],
)


@pytest.mark.parametrize(
    ("line", "question", "choice"),
    [
        ("y", APPROVAL, {"type": "approve"}),
        (" YES ", APPROVAL, {"type": "approve"}),
        ("n", APPROVAL, {"type": "reject"}),
        ("n too risky", APPROVAL, {"type": "reject", "message": "too risky"}),
        ("e", APPROVAL, EditWanted("")),
        ('e {"path": "b"}', APPROVAL, EditWanted('{"path": "b"}')),
        ("y", AUTHORIZATION, {"type": "approve"}),
        ("no, not today", AUTHORIZATION, {"type": "reject", "message": "not today"}),
        ("n", FREE, {"type": "respond", "message": "n"}),
        ("the blue one", FREE, {"type": "respond", "message": "the blue one"}),
    ],
)
def test_one_line_answers(line: str, question: Question, choice: object):
    assert read_choice(line, question) == choice


@pytest.mark.parametrize(
    ("line", "question"), [("", APPROVAL), ("maybe", APPROVAL), ("e", AUTHORIZATION), ("  ", FREE)]
)
def test_a_line_that_answers_nothing_is_unclear(line: str, question: Question):
    assert isinstance(read_choice(line, question), Unclear)


def test_edited_arguments_must_be_a_json_object():
    assert read_arguments('{"path": "b"}') == {"path": "b"}
    assert "Not JSON" in read_arguments("{path: b}").problem  # type: ignore[union-attr]
    assert "Not a JSON object" in read_arguments('["b"]').problem  # type: ignore[union-attr]


class Keys:
    """A line source as the terminal's line editor behaves: KeyboardInterrupt is Ctrl-C."""

    def __init__(self, *lines: str | type[KeyboardInterrupt]) -> None:
        self.lines = list(lines)

    async def readline(self, *, prompt: str = "", default: str = "") -> str | None:
        if not self.lines:
            return None
        line = self.lines.pop(0)
        if line is KeyboardInterrupt:
            raise KeyboardInterrupt
        return line  # type: ignore[return-value]


def asker_over(lines: object) -> tuple[QuestionAsker, Console]:
    console = Console(record=True, width=200)
    channel = AnswerChannel(lines=lines, console=console, echo=True)  # type: ignore[arg-type]
    return QuestionAsker(lambda: channel, interrupts=Interrupts()), console


def pending(number: int, question: Question) -> PendingQuestion:
    return PendingQuestion(id=f"q{number}", question=question)


async def test_ctrl_c_rejects_that_question_and_the_next_is_asked():
    asker, console = asker_over(Keys(KeyboardInterrupt, "y"))

    answers = await asker.ask([pending(1, APPROVAL), pending(2, AUTHORIZATION)])

    assert answers.decisions == {"q1": {"type": "reject"}, "q2": {"type": "approve"}}
    assert not answers.ended
    assert "rejected (Ctrl-C)" in console.export_text()


async def test_an_unclear_line_or_bad_json_asks_again_and_end_of_input_ends():
    asker, console = asker_over(Keys("maybe", "e", "{oops", "[1]", '{"path": "b"}', "/pending"))

    answers = await asker.ask([pending(1, APPROVAL), pending(2, APPROVAL)])

    edited = {"type": "edit", "edited_action": {"name": "files_tidy", "args": {"path": "b"}}}
    assert answers.decisions == {"q1": edited}, "the second got no answer"
    assert answers.ended
    shown = console.export_text()
    assert "Please answer y approve · n [reason] reject · e edit, not 'maybe'" in shown
    assert "Not JSON" in shown and "Not a JSON object" in shown
    assert shown.count("2 questions wait for your answer") == 2, "/pending showed them again"


async def test_a_piped_line_read_for_a_cancelled_question_goes_to_the_next(monkeypatch):
    reader, writer = os.pipe()
    monkeypatch.setattr("sys.stdin", os.fdopen(reader))
    lines = PipedLines(first=["kept"])
    assert await lines.readline() == "kept"
    waiting = asyncio.ensure_future(lines.readline())
    await asyncio.sleep(0)  # the read is under way: the thread waits on the pipe
    waiting.cancel()
    os.write(writer, b"for the next\n")
    os.close(writer)

    assert await lines.readline() == "for the next"
    assert await lines.readline() is None


# --- the session: waiting for answers is not an unfinished turn --------------------------

entered: list[str] = []


@tool
async def tidy(path: str) -> str:
    """Tidy a file away, once the person approves."""
    entered.append(path)
    decision = ask_person(Question(
        kind="approval", request_id=path, agent_path=[], action={"name": "tidy", "args": {"path": path}},
        allowed=["approve", "edit", "reject"],
    ))
    return f"{decision['type']} {path}"


async def test_a_waiting_turn_is_answered_once_and_never_resumed_as_unfinished(scripted):
    entered.clear()
    model = scripted(call_tools(("tidy", {"path": "a"}), ("tidy", {"path": "b"})), "Done.")
    session = make_session(model, [tidy])

    paused = await session.run("clean up")

    assert [q.question["action"]["args"] for q in paused.questions] == [{"path": "a"}, {"path": "b"}]
    assert paused.answer == "" and [c.status for c in paused.tool_calls] == ["paused", "paused"]
    assert await session.pending() == paused.questions
    assert await session.open() is False, "waiting for answers is not a turn left unfinished"
    assert (await session.resume()).questions == paused.questions
    assert entered == ["a", "b"], "resume() did not run the paused calls again"
    with pytest.raises(QuestionsWaitingError):
        await session.run("something else")

    first, second = paused.questions
    done = await session.answer({first.id: {"type": "approve"}, second.id: {"type": "reject", "message": "no"}})

    assert done.answer == "Done." and done.questions == []
    assert sorted(entered) == ["a", "a", "b", "b"], "each paused call ran once more, in one resume"
    replies = sorted(m.text for m in await session.history() if isinstance(m, ToolMessage))
    assert [json.loads(r)["message"] for r in replies] == ["approve a", "reject b"]
    body = done.to_json()
    assert body["answer"] == "Done."
    assert [(q["tool"], q["decision"], q["message"]) for q in body["questions"]] == [
        ("tidy", "approve", None), ("tidy", "reject", "no"),
    ]
    assert await session.pending() == []


async def test_answering_a_question_that_is_not_open_is_refused(scripted):
    entered.clear()
    session = make_session(scripted(call_tools(("tidy", {"path": "a"}))), [tidy])
    await session.run("clean up")

    with pytest.raises(Exception, match="No open question nope"):
        await session.answer({"nope": {"type": "approve"}})
    assert len(await session.pending()) == 1


async def test_a_background_result_that_ends_while_a_question_waits_comes_with_the_next_message(scripted):
    from tests.dispatch.test_background import runtime, slow_tools

    entered.clear()
    gate = asyncio.Event()

    def told(messages: list[object]) -> str:
        notices = [m.text for m in messages if "Background job" in getattr(m, "text", "")]
        return "The slow work is done." if notices and "slow work done" in notices[-1] else "?"

    model = scripted(call_tools(("slow_work", {}), ("tidy", {"path": "a"})), "Tidied.", told)
    app = runtime(model, [*slow_tools(gate, background=True), tidy])
    session = app.session(user_id="u")
    reports: list[object] = []
    session.on_follow_up = lambda task, result: reports.append(result)

    [question] = (await session.run("work and tidy")).questions
    gate.set()
    await app.jobs.drain()

    assert reports == [None], "no follow-up turn while the question waits"
    assert await session.pending() == [question], "the paused turn was left as it was"
    assert (await session.answer({question.id: {"type": "approve"}})).answer == "Tidied."
    assert (await session.run("what else?")).answer == "The slow work is done."


# --- chat and ask -----------------------------------------------------------------------------


def test_chat_approve_edit_reject_and_a_question_through_piped_stdin(cli, tmp_path: Path):
    entered, tidied = asking_folder(tmp_path)
    script = [
        [("files_tidy", {"path": "a"})], "Tidied a.",
        [("files_tidy", {"path": "b"})], "Tidied what you chose.",
        [("files_tidy", {"path": "d"})], "Left d alone.",
        [("files_ask", {"question": "Which colour?"})], "Blue it is.",
    ]
    stdin = (
        "y\n"  # the folder's approval at startup
        "tidy a\ny\n"
        "tidy b\ne\nnot json\n{\"path\": \"c\"}\n"
        "tidy d\nn too risky\n"
        "pick a colour\nblue\n"
        "/pending\n"
    )
    with OpenAICompatibleServer(script) as server:
        done = cli("chat", cwd=tmp_path, stdin=stdin, env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert lines_of(tidied) == ["a", "c"], "approved and edited ran (the edit as edited); rejected did not"
    assert lines_of(entered) == ["a", "a", "b", "b", "d", "d"], "each call ran before and after its answer"
    assert tool_replies(server.requests[1]) == ["tidied a"]
    assert tool_replies(server.requests[3])[-1] == "tidied c"
    assert tool_replies(server.requests[5])[-1] == "not tidied: too risky"
    assert tool_replies(server.requests[7])[-1] == "the person said: blue"
    assert done.stdout.splitlines()[:4] == ["Tidied a.", "Tidied what you chose.", "Left d alone.", "Blue it is."]
    assert "1 question waits for your answer" in done.stderr
    assert '[1/1] approval · files · files_tidy' in done.stderr
    assert 'arguments: {"path": "d"}' in done.stderr
    assert "why: deleting is for the person to decide" in done.stderr
    assert "asks: Which colour?" in done.stderr
    assert "Not JSON" in done.stderr, "JSON that does not parse is asked again"
    assert "No open questions." in done.stdout


def test_ask_answers_two_questions_from_stdin_and_resumes_once(cli, tmp_path: Path):
    entered, tidied = asking_folder(tmp_path)
    script = [[("files_tidy", {"path": "a"}), ("files_tidy", {"path": "b"})], "Done."]
    with OpenAICompatibleServer(script) as server:
        done = cli(
            "ask", "--answers-from-stdin", "--json", "clean up", cwd=tmp_path, stdin='y\ne\n{"path": "z"}\nn nope\n',
            env_extra=server_env(server),
        )

    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["answer"] == "Done."
    questions = body["questions"]
    assert [q["id"] for q in questions] and all(q["id"] for q in questions)
    assert [
        (q["kind"], q["agent_path"], q["tool"], q["arguments"], q["decision"], q["edited_arguments"], q["message"])
        for q in questions
    ] == [
        ("approval", ["files"], "files_tidy", {"path": "a"}, "edit", {"path": "z"}, None),
        ("approval", ["files"], "files_tidy", {"path": "b"}, "reject", None, "nope"),
    ]
    assert lines_of(tidied) == ["z"]
    assert sorted(lines_of(entered)) == ["a", "a", "b", "b"], "one resume: each paused call ran once more"
    assert len(server.requests) == 2
    assert sorted(tool_replies(server.requests[1])) == ["not tidied: nope", "tidied z"]
    assert "2 questions wait for your answer" in done.stderr


def test_end_of_input_rejects_every_question_in_ask(cli, tmp_path: Path):
    entered, tidied = asking_folder(tmp_path)
    script = [[("files_tidy", {"path": "a"}), ("files_tidy", {"path": "b"})], "Nothing tidied."]
    with OpenAICompatibleServer(script) as server:
        done = cli("ask", "--answers-from-stdin", "clean up", cwd=tmp_path, stdin="y\n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Nothing tidied."
    assert lines_of(tidied) == [], "nothing is approved silently"
    assert tool_replies(server.requests[1]) == ["not tidied: no answer: the person's input ended"] * 2
    assert "end of input: 2 question(s) rejected" in done.stderr


def test_chat_leaves_questions_open_at_end_of_input_and_asks_them_again(cli, tmp_path: Path):
    entered, tidied = asking_folder(tmp_path)
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [[("files_tidy", {"path": "a"})], "Tidied a."]
    with OpenAICompatibleServer(script) as server:
        first = cli("chat", "-s", session, cwd=tmp_path, stdin="y\ntidy a\n", env_extra=server_env(server))
        assert first.returncode == 0, first.stderr
        assert f"1 question(s) left open; `orchestrator chat --session {session}` asks them again" in first.stderr
        assert lines_of(tidied) == []

        second = cli("chat", "-s", session, cwd=tmp_path, stdin="/pending\ny\n", env_extra=server_env(server))

    assert second.returncode == 0, second.stderr
    assert f"session {session} waits for your answer to 1 question(s)" in second.stderr
    assert second.stderr.count("1 question waits for your answer") == 2, "shown, then again at /pending"
    assert second.stdout.strip() == "Tidied a."
    assert lines_of(tidied) == ["a"]


async def test_a_process_killed_while_a_question_waits_asks_it_again(
    cli, tmp_path: Path, database_url: str, database: Database
):
    entered, tidied = asking_folder(tmp_path)
    session = f"s-{uuid.uuid4().hex[:8]}"
    stderr = tmp_path / "first.err"

    async def asked() -> bool:
        return "1 question waits for your answer" in stderr.read_text()

    with OpenAICompatibleServer([[("files_tidy", {"path": "a"})], "Tidied a."]) as server:
        env = {
            **os.environ, **server_env(server),
            "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none", "HOME": str(tmp_path),
        }
        await start_and_kill(tmp_path, session, env, entered, ready=asked)  # SIGKILL at the question
        again = cli("chat", "-s", session, cwd=tmp_path, stdin="y\n", env_extra=server_env(server))

    assert again.returncode == 0, again.stderr
    assert f"session {session} waits for your answer to 1 question(s)" in again.stderr
    assert "finishing the interrupted turn" not in again.stderr
    assert "1 question waits for your answer" in again.stderr
    assert again.stdout.strip() == "Tidied a."
    assert lines_of(tidied) == ["a"]
    assert lines_of(entered) == ["a", "a"], "asked once in each process, run once"
    reply = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    request_id = await _request_of(database, session)
    statuses = [s for s, _ in await request_history(database, request_id, user_id="local")]
    assert statuses[:3] == ["created", "running", "paused"]
    assert statuses[-2:] == ["completed", "closed"]
    assert json.loads(reply["content"])["message"] == "tidied a"


async def _request_of(database: Database, session: str) -> str:
    from sqlalchemy import text

    async with database.user_transaction("local") as connection:
        return await connection.scalar(
            text("SELECT request_id FROM requests WHERE session_id = :s"), {"s": session}
        )


def test_requests_show_prints_each_event_with_its_time(cli, tmp_path: Path):
    asking_folder(tmp_path)
    script = [[("files_tidy", {"path": "a"})], "Tidied a."]
    with OpenAICompatibleServer(script) as server:
        asked = cli("ask", "--answers-from-stdin", "--json", "tidy a", cwd=tmp_path, stdin="y\ny\n", env_extra=server_env(server))
    [call] = json.loads(asked.stdout)["tool_calls"]

    shown = cli("requests", "show", call["request_id"], cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    first, *events = shown.stdout.splitlines()
    assert first.startswith(f"files_tidy completed (closed)  {call['request_id']}")
    stamp = r"    \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  "
    assert all(re.match(stamp, line) for line in events), events
    statuses = [line.split()[2] for line in events]
    assert statuses[:3] == ["created", "running", "paused"] and "resumed" in statuses
    assert statuses[-1] == "closed"


def test_event_details_read_as_a_person_reads_them():
    from orchestrator.cli.request_events import readable

    asked = {
        "asked": [{
            "interrupt_id": "i1",
            "question": {
                "kind": "approval", "request_id": "r1", "agent_path": ["personal_assistant", "email_agent"],
                "action": {"name": "delete_mail", "args": {"id": 7}}, "allowed": ["approve"],
                "why": "its name matches 'delete'",
            },
        }]
    }
    assert readable(json.dumps(asked)) == (
        'asked: approval · personal_assistant › email_agent · delete_mail {"id": 7} '
        "(why: its name matches 'delete')"
    )
    edited = {"decision": "edit", "args": {"id": 7}, "edited_args": {"id": 8}, "reason": None}
    assert readable(json.dumps(edited)) == 'decision=edit args={"id": 7} edited_args={"id": 8}'
    assert readable("3f2a closed") == "3f2a closed"


def test_on_a_terminal_ctrl_c_rejects_a_question_and_the_next_is_asked(tmp_path: Path, database_url: str):
    from tests.cli.test_signals import Terminal, wait_for_screen

    entered, tidied = asking_folder(tmp_path)
    terminal = Terminal()
    script = [[("files_tidy", {"path": "a"}), ("files_tidy", {"path": "b"})], "Tidied b only."]
    with OpenAICompatibleServer(script) as server:
        chat = terminal.chat(tmp_path, server=server, database_url=database_url)
        try:
            wait_for_screen(terminal.shows("Approve and load it?"), chat, terminal)
            terminal.type(b"y\r")
            wait_for_screen(terminal.shows("you>"), chat, terminal)
            terminal.type(b"tidy both\r")
            wait_for_screen(terminal.shows("[1/2] y approve"), chat, terminal)
            terminal.type(b"\x03")  # Ctrl-C at the first question
            wait_for_screen(terminal.shows("[2/2] y approve", after="rejected (Ctrl-C)"), chat, terminal)
            terminal.type(b"y\r")
            wait_for_screen(terminal.shows("you>", after="Tidied b only."), chat, terminal)
            terminal.type(b"\x04")  # Ctrl-D at the prompt ends the chat
            assert chat.wait(timeout=120) == 0, bytes(terminal.screen).decode(errors="replace")
        finally:
            if chat.poll() is None:
                chat.kill()
    assert lines_of(tidied) == ["b"]
    assert sorted(tool_replies(server.requests[1])) == ["not tidied: rejected", "tidied b"]


def test_a_gated_call_three_levels_down_answered_in_ask_and_shown_by_requests_show(cli, tmp_path: Path):
    from tests.dispatch.test_hitl import SENSITIVE_LEAF
    from tests.tool_folders import three_levels

    runs = tmp_path / "runs.txt"
    three_levels(tmp_path / "sub_graphs", leaf_code=SENSITIVE_LEAF.format(runs=str(runs)))
    script = [
        [("top_ask", {"request": "clear the cache"})],
        [("mid_ask", {"request": "clear the cache"})],
        [("leaf_clear", {"what": "cache"})],
        "mid: cleared", "top: cleared", "Cleared.",
    ]
    stdin = 'y\ny\ny\ne\n{"what": "logs"}\n'  # three folders approved, then the edit
    with OpenAICompatibleServer(script) as server:
        asked = cli("ask", "--answers-from-stdin", "--json", "clear the cache", cwd=tmp_path, stdin=stdin, env_extra=server_env(server))

    assert asked.returncode == 0, asked.stderr
    assert "[1/1] approval · top › mid · leaf_clear" in asked.stderr
    assert runs.read_text() == "logs\n", "the call ran once, with the edited arguments"
    body = json.loads(asked.stdout)
    [question] = body["questions"]
    assert (question["agent_path"], question["tool"], question["decision"], question["edited_arguments"]) == (
        ["top", "mid"], "leaf_clear", "edit", {"what": "logs"}
    )
    [call] = body["tool_calls"]

    shown = cli("requests", "show", call["request_id"], cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    leaf = shown.stdout[shown.stdout.index("leaf_clear completed"):]
    assert 'paused        asked: approval · top › mid · leaf_clear {"what": "cache"}' in leaf
    assert 'edited        decision=edit args={"what": "cache"} edited_args={"what": "logs"}' in leaf


def test_a_question_shows_a_description_a_line_at_a_time():
    from orchestrator.terminal.answers import describe

    question = Question(
        kind="approval", request_id="r1", agent_path=["notes"],
        action={"name": "files_delete", "args": {"path": "a"}, "description": "Delete.\n(Part of files.)"},
        allowed=["approve", "edit", "reject"],
    )
    text = describe(PendingQuestion("i1", question), 1, 1)

    assert "\\n" not in text
    assert "    Delete.\n    (Part of files.)" in text


def test_tools_show_says_which_actions_need_a_decision(tmp_path: Path):
    from tests.helpers import run_cli

    config = {"name": "files", "description": "Files.", "version": "1", "sensitive_actions": ["say"]}
    write_folder(tmp_path / "sub_graphs", "files", config=config)
    assert run_cli("tools", "approve", "files", cwd=tmp_path).returncode == 0

    done = run_cli("tools", "show", "files", "--json", cwd=tmp_path)

    [say] = json.loads(done.stdout)["actions"]
    assert say["needs_decision"] == "its folder's tool_config.yaml lists the action in sensitive_actions"
    shown = run_cli("tools", "show", "files", cwd=tmp_path).stdout
    assert "needs your decision: its folder's tool_config.yaml lists the action" in shown


@pytest.mark.parametrize("leave", ["/exit", " /QUIT "])
async def test_exit_at_a_question_answers_nothing_and_ends_the_questions(leave: str):
    asker, _ = asker_over(Keys("y", leave, "y"))

    answers = await asker.ask([pending(1, APPROVAL), pending(2, FREE), pending(3, APPROVAL)])

    assert answers.decisions == {"q1": {"type": "approve"}}
    assert answers.ended


def test_an_authorization_says_its_tool_and_reason_once():
    from orchestrator.terminal.answers import describe

    args = {"tool_name": "payments", "reason": "Pay the invoice of 12 EUR."}
    question = Question(
        kind="authorization", request_id="r1", agent_path=[],
        action={"name": "request_authorization", "args": args, "description": args["reason"]},
        allowed=["approve", "reject"],
    )
    text = describe(PendingQuestion("i1", question), 1, 1)

    assert "    to use: payments\n    because: Pay the invoice of 12 EUR." in text
    assert text.count("Pay the invoice") == 1


async def test_after_exit_no_later_question_is_asked():
    asker, _ = asker_over(Keys("/exit", "y"))
    first = await asker.ask([pending(1, APPROVAL)])

    later = await asker.ask([pending(2, APPROVAL)])  # the turn asked again, after rejections

    assert first.ended and later.ended
    assert later.decisions == {}, "the 'y' after /exit approves nothing"


async def test_answers_given_before_exit_in_chat_are_kept_and_the_rest_left_open():
    from orchestrator.conversation.session import TurnResult
    from orchestrator.terminal.questions import answer_until_done

    asker, console = asker_over(Keys("y", "/exit"))
    resumed: list[dict[str, object]] = []
    second = pending(2, APPROVAL)

    async def resume(decisions: dict[str, object]) -> TurnResult:
        resumed.append(decisions)
        return TurnResult(answer="", answer_id=None, iterations=1, questions=[second])

    result, ended = await answer_until_done(
        [pending(1, APPROVAL), second], asker=asker, resume=resume, session_id="s1",
        reject_at_end=False,
    )

    assert resumed == [{"q1": {"type": "approve"}}], "the 'y' is not lost"
    assert (result, ended) == (None, True)
    assert "1 question(s) left open; `orchestrator chat --session s1` asks them again" in console.export_text()
