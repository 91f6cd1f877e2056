"""Issue 47, item 4: `chat --server` and `ask --server` against a real `orchestrator serve`
(its application on a real port, tests/api/served.py): a turn, Ctrl-C, a question answered,
`ask --server --json`, and what the server refuses, each one line."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import cast

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph_sdk.schema import ThreadState

from orchestrator.conversation.turns import TurnResult
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.scripted import call_tools
from tests.api.served import served
from tests.cli.test_signals import Terminal, wait_for_screen
from tests.helpers import cli_env, run_cli, run_cli_process, tool_json

pytestmark = pytest.mark.usefixtures("database_logins")
KEYS = {"key-ann": "ann", "key-bob": "bob"}
ANN = {"ORCHESTRATOR_API_KEY": "key-ann"}


@tool
async def echo(text: str) -> str:
    """Repeat the text."""
    return f"echo: {text}"


def said(state: ThreadState) -> list[tuple[str, object]]:
    """The thread's messages as (type, content)."""
    values = cast(dict[str, list[dict[str, object]]], state["values"])
    return [(str(m["type"]), m["content"]) for m in values["messages"]]


def answer_with_result(messages: list[BaseMessage]) -> str:
    return f"done ({tool_json(messages[-1].text)['message']})"


async def ask(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`orchestrator ask ARGS` in this process, on a thread: the server runs on this loop."""
    return await asyncio.to_thread(run_cli, "ask", *args, cwd=cwd, env={**ANN, **(env or {})}, stdin=stdin)


async def test_ask_server_json_prints_the_keys_of_ask_json(database_logins, tmp_path: Path, scripted):
    model = scripted(call_tools(("echo", {"text": "hi"})), answer_with_result)
    async with served(database_logins, tmp_path, model, tools=[echo], keys=KEYS) as server:
        done = await ask("--server", server.url, "--json", "say hi", cwd=tmp_path)
        body = json.loads(done.stdout)
        thread = await server.client("key-ann").threads.get(body["session_id"])

    assert done.returncode == 0, done.stderr
    local_keys = {*TurnResult(answer="", answer_id=None, iterations=0).to_json(), "error", "follow_ups", "session_id", "user_id"}
    assert set(body) == local_keys
    assert body["answer"] == "done (echo: hi)" and body["error"] is None
    assert [(c["name"], c["arguments"], c["status"]) for c in body["tool_calls"]] == [("echo", {"text": "hi"}, "success")]
    assert body["iterations"] == 2 and body["questions"] == [] and body["follow_ups"] == []
    assert thread["thread_id"] == body["session_id"]  # the session is the server's thread, ann's


async def test_ask_server_streams_the_answer_and_goes_on_with_a_session(database_logins, tmp_path: Path, scripted):
    model = scripted(call_tools(("echo", {"text": "hi"})), answer_with_result, "second answer")
    session = f"s-{uuid.uuid4().hex[:8]}"
    async with served(database_logins, tmp_path, model, tools=[echo], keys=KEYS) as server:
        first = await ask("--server", server.url, "--session", session, "hello", cwd=tmp_path)
        second = await ask("--server", server.url, "--session", session, "again", cwd=tmp_path)
        state = await server.client("key-ann").threads.get_state(session)

    assert (first.returncode, first.stdout.strip()) == (0, "done (echo: hi)"), first.stderr
    assert "tool echo (1/1): success" in first.stderr  # the tool's progress, as a local turn shows it
    assert (second.returncode, second.stdout.strip()) == (0, "second answer"), second.stderr
    kinds = [kind for kind, _ in said(state)]
    assert kinds == ["human", "ai", "tool", "ai", "human", "ai"] and said(state)[-2:] == [("human", "again"), ("ai", "second answer")]


async def test_ask_server_answers_a_question_and_the_call_runs(database_logins, tmp_path: Path, scripted):
    deleted: list[str] = []

    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), answer_with_result)
    async with served(database_logins, tmp_path, model, tools=[files_delete], keys=KEYS) as server:
        done = await ask(
            "--server", server.url, "--json", "--answers-from-stdin", "clean up", cwd=tmp_path, stdin="y\n"
        )

    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert deleted == ["a.txt"]
    assert body["answer"] == "done (deleted a.txt)"
    (question,) = body["questions"]
    assert (question["tool"], question["decision"]) == ("files_delete", "approve")


async def test_what_the_server_refuses_is_one_line(database_logins, tmp_path: Path, scripted):
    model, session = scripted("ann's answer"), f"ann-{uuid.uuid4().hex[:8]}"
    async with served(database_logins, tmp_path, model, keys=KEYS) as server:
        wrong_key = await ask("--server", server.url, "hi", cwd=tmp_path, env={"ORCHESTRATOR_API_KEY": "forged"})
        mine = await ask("--server", server.url, "--session", session, "hi", cwd=tmp_path)
        not_yours = await ask(
            "--server", server.url, "--session", session, "hi", cwd=tmp_path, env={"ORCHESTRATOR_API_KEY": "key-bob"}
        )
        state = await server.client("key-ann").threads.get_state(session)

    assert wrong_key.returncode == 1
    assert wrong_key.stderr.strip().startswith("error: the server refused the API key ("), wrong_key.stderr
    assert wrong_key.stderr.strip().endswith("): check ORCHESTRATOR_API_KEY")
    assert mine.returncode == 0, mine.stderr
    assert not_yours.returncode == 1
    assert not_yours.stderr.strip() == f"error: session {session} is not yours: give another id, or none for a new session"
    assert said(state) == [("human", "hi"), ("ai", "ann's answer")]  # bob's "hi" went nowhere


async def test_a_session_running_a_turn_elsewhere_is_one_line(database_logins, tmp_path: Path, scripted):
    entered, gate = threading.Event(), threading.Event()

    @tool
    async def slow_task() -> str:
        """Take long."""
        entered.set()
        await asyncio.to_thread(gate.wait, 120)
        return "finished"

    model, session = scripted(call_tools(("slow_task", {})), "all done"), f"busy-{uuid.uuid4().hex[:8]}"
    async with served(database_logins, tmp_path, model, tools=[slow_task], keys=KEYS) as server:
        first = asyncio.ensure_future(ask("--server", server.url, "--session", session, "take your time", cwd=tmp_path))
        try:
            assert await asyncio.to_thread(entered.wait, 120)
            second = await ask("--server", server.url, "--session", session, "and now?", cwd=tmp_path)
        finally:
            gate.set()
        done = await first

    assert second.returncode == 1
    assert second.stderr.strip().endswith(
        f"error: session {session} is running a turn already (another chat?): try again when it ends"
    ), second.stderr
    assert (done.returncode, done.stdout.strip()) == (0, "all done"), done.stderr


async def test_a_new_chat_in_which_nothing_was_said_is_not_kept(database_logins, tmp_path: Path, scripted):
    fay = {"ORCHESTRATOR_API_KEY": "key-fay"}
    async with served(database_logins, tmp_path, scripted("hello fay"), keys={"key-fay": "fay"}) as server:
        idle = await asyncio.to_thread(
            run_cli, "chat", "--server", server.url, cwd=tmp_path, env=fay, stdin="/sessions\n/cost\n"
        )
        left = await server.client("key-fay").threads.search()
        used = await asyncio.to_thread(run_cli, "chat", "--server", server.url, cwd=tmp_path, env=fay, stdin="hi\n")
        kept = await server.client("key-fay").threads.search()

    assert idle.returncode == 0, idle.stderr
    assert "kept" not in idle.stderr and left == [], "an empty session is neither kept nor listed"
    assert used.returncode == 0 and "kept ·" in used.stderr and len(kept) == 1


async def test_a_turn_cancelled_on_the_server_is_said_so(database_logins, tmp_path: Path, scripted):
    entered = threading.Event()

    @tool
    async def slow_task() -> str:
        """Take long."""
        entered.set()
        await asyncio.Event().wait()  # until cancelled
        return "finished"

    model, session = scripted(call_tools(("slow_task", {}))), f"cut-{uuid.uuid4().hex[:8]}"
    async with served(database_logins, tmp_path, model, tools=[slow_task], keys=KEYS) as server:
        asked = asyncio.ensure_future(ask("--server", server.url, "--session", session, "take long", cwd=tmp_path))
        assert await asyncio.to_thread(entered.wait, 120)
        client = server.client("key-ann")
        [run] = await client.runs.list(session)
        await client.runs.cancel(session, run["run_id"], wait=True)  # another client cancels it
        done = await asked

    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "error: the turn was stopped on the server (cancelled there, or the server shut down): what it "
        "did is kept in the session; send the message again to go on"
    ), done.stderr


@pytest.mark.process
async def test_ctrl_c_stops_ask_server_and_its_run_on_the_server(database_logins, tmp_path: Path, scripted):
    entered, gate = threading.Event(), threading.Event()

    @tool
    async def slow_task() -> str:
        """Take long."""
        entered.set()
        await asyncio.to_thread(gate.wait, 120)
        return "finished"

    model, session = scripted(call_tools(("slow_task", {})), "ready again"), f"int-{uuid.uuid4().hex[:8]}"
    async with served(database_logins, tmp_path, model, tools=[slow_task], keys=KEYS) as server:
        with open(tmp_path / "out.json", "w") as stdout:
            ask_process = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "ask", "--server", server.url, "--json", "-s", session, "go"],
                stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                cwd=tmp_path, env={**cli_env(tmp_path), **ANN}, start_new_session=True,
            )
            try:
                assert await asyncio.to_thread(entered.wait, 120)
                ask_process.send_signal(signal.SIGINT)
                status = await asyncio.to_thread(ask_process.wait, 120)
            finally:
                gate.set()
                if ask_process.poll() is None:
                    ask_process.kill()
        # the run was cancelled on the server, not left running: the session takes the next turn
        after = await ask("--server", server.url, "-s", session, "still there?", cwd=tmp_path)
        state = await server.client("key-ann").threads.get_state(session)

    assert status == 130
    body = json.loads((tmp_path / "out.json").read_text())
    assert body["error"] == "interrupted (SIGINT)" and body["answer"] is None and body["session_id"] == session
    assert (after.returncode, after.stdout.strip()) == (0, "ready again"), after.stderr
    kind, ended = said(state)[2]  # the message, its call, then the call's end
    assert kind == "tool" and json.loads(str(ended))["error_code"] == "cancelled"


@pytest.mark.process
def test_ask_server_against_the_serve_process_with_a_users_key(database_logins, tmp_path: Path):
    from tests.api.test_serve_process import environment, key_for, serving

    with OpenAICompatibleServer(["hello from the served process"]) as model:
        env = environment(tmp_path, database_logins, model)
        key = key_for("carol", tmp_path, env)
        with serving(tmp_path, env) as (_, url, _):
            done = run_cli_process("ask", "--server", url, "hello", cwd=tmp_path, env={"ORCHESTRATOR_API_KEY": key})
        limited_env = {**env, "ORCHESTRATOR_SERVER_REQUESTS_PER_MINUTE": "1"}
        with serving(tmp_path, limited_env) as (_, url, _):
            # one request a minute: the session is made, the turn's request is refused
            limited = run_cli_process("ask", "--server", url, "hello", cwd=tmp_path, env={"ORCHESTRATOR_API_KEY": key})

    assert (done.returncode, done.stdout.strip()) == (0, "hello from the served process"), done.stderr
    assert limited.returncode == 1
    assert re.fullmatch(
        r"error: the server limits how often your key may ask: try again in \d+ s", limited.stderr.strip()
    ), limited.stderr


async def test_a_turn_that_fails_on_the_server_is_one_line(database_logins, tmp_path: Path, scripted):
    def broken(messages: list[BaseMessage]) -> str:
        raise RuntimeError("the model broke")

    async with served(database_logins, tmp_path, scripted(broken, broken, broken, "back again"), keys=KEYS) as server:
        failed = await ask("--server", server.url, "hi", cwd=tmp_path)
        as_json = await ask("--server", server.url, "--json", "hi again", cwd=tmp_path)
        chat = await asyncio.to_thread(
            run_cli, "chat", "--server", server.url, cwd=tmp_path, env=ANN, stdin="first\nsecond\n"
        )

    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == "error: the turn failed on the server: internal error (RuntimeError)"
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"].startswith("the turn failed on the server: ")
    # the chat goes on after a failed turn; its exit status says one failed
    assert chat.returncode == 1 and chat.stdout.strip() == "back again", chat.stderr
    assert "error: the turn failed on the server: internal error (RuntimeError)" in chat.stderr


async def test_chat_server_piped_questions_left_open_then_continued(database_logins, tmp_path: Path, scripted):
    deleted: list[str] = []

    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    dan, session = {"ORCHESTRATOR_API_KEY": "key-dan"}, f"left-{uuid.uuid4().hex[:8]}"
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), answer_with_result)
    async with served(database_logins, tmp_path, model, tools=[files_delete], keys={"key-dan": "dan"}) as server:
        url = server.url

        def chat(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
            return run_cli("chat", "--server", url, *args, cwd=tmp_path, env=dan, stdin=stdin)

        first = await asyncio.to_thread(chat, "--session", session, stdin="clean up\n")
        assert deleted == []  # end of input at the question: nothing approved, the question kept
        again = await asyncio.to_thread(chat, "--continue", stdin="y\n/pending\n/history\n/sessions\n/tools\n/cost\n")

    assert first.returncode == 0, first.stderr
    assert f"1 question(s) left open; `orchestrator chat --session {session} --server {url}` asks them again" in first.stderr
    assert again.returncode == 0, again.stderr
    assert f"session {session} waits for your answer to 1 question(s)" in again.stderr
    assert deleted == ["a.txt"]
    out = again.stdout
    assert "done (deleted a.txt)" in out and "No open questions." in out
    assert "you: clean up" in out and "assistant: done (deleted a.txt)" in out  # /history
    assert f"{session} (this one)" in out  # /sessions
    assert "/tools is not available with --server" in again.stderr
    assert "scripted" in out and "total" in out  # /cost: this chat's turn
    assert f"session {session} kept · orchestrator chat --server {url} --session {session}" in again.stderr


# --- `chat --server` in a pseudo-terminal ---------------------------------------------------------


def chat_on(terminal: Terminal, tmp_path: Path, url: str, *args: str) -> subprocess.Popen[bytes]:
    """`orchestrator chat --server URL` on `terminal`, as ann; read from now on."""
    env = {**cli_env(tmp_path), **ANN, "TERM": "xterm"}
    chat = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "chat", "--server", url, *args],
        stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave,
        cwd=tmp_path, env=env, preexec_fn=terminal.controlling,  # noqa: PLW1509
    )
    terminal.read_on()
    return chat


async def screen(terminal: Terminal, chat: subprocess.Popen[bytes], text: str, *, after: str = "") -> None:
    """Wait (on a thread: the server runs on this loop) until `text` shows."""
    await asyncio.to_thread(wait_for_screen, terminal.shows(text, after=after), chat, terminal)


async def test_chat_server_on_a_terminal_a_turn_ctrl_c_and_a_question(database_logins, tmp_path: Path, scripted):
    entered, gate = threading.Event(), threading.Event()
    deleted: list[str] = []

    @tool
    async def slow_task() -> str:
        """Take long."""
        entered.set()
        await asyncio.to_thread(gate.wait, 120)
        return "finished"

    @tool
    async def files_delete(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    model = scripted(
        "Hello from the server.",
        call_tools(("slow_task", {})),
        "Still here.",
        call_tools(("files_delete", {"path": "a.txt"})),
        answer_with_result,
    )
    terminal, session = Terminal(), f"pty-{uuid.uuid4().hex[:8]}"
    async with served(database_logins, tmp_path, model, tools=[slow_task, files_delete], keys=KEYS) as server:
        chat = chat_on(terminal, tmp_path, server.url, "--session", session)
        try:
            await screen(terminal, chat, "you>")
            terminal.type(b"hi\r")
            await screen(terminal, chat, "you>", after="Hello from the server.")
            terminal.type(b"take your time\r")
            await asyncio.to_thread(entered.wait, 120)
            terminal.type(b"\x03")  # Ctrl-C: the run is cancelled on the server
            await screen(terminal, chat, "cancelled")
            terminal.type(b"what now?\r")
            await screen(terminal, chat, "you>", after="Still here.")
            terminal.type(b"clean up\r")
            await screen(terminal, chat, "files_delete")
            terminal.type(b"y\r")
            await screen(terminal, chat, "you>", after="done (deleted a.txt)")
            terminal.type(b"/cost\r")
            await screen(terminal, chat, "you>", after="in this process")  # /cost's last line
            assert terminal.shows("scripted", after="/cost")()  # the model of this chat's turns
            terminal.type(b"\x04")  # Ctrl-D at the prompt ends the chat
            await screen(terminal, chat, "kept")
            assert await asyncio.to_thread(chat.wait, 120) == 0, bytes(terminal.screen).decode(errors="replace")
        finally:
            gate.set()
            if chat.poll() is None:
                chat.kill()
        state = await server.client("key-ann").threads.get_state(session)

    assert deleted == ["a.txt"]
    messages = said(state)
    kind, ended = messages[messages.index(("human", "take your time")) + 2]  # its call, then its end
    assert kind == "tool" and json.loads(str(ended))["error_code"] == "cancelled"
    assert messages[-6:] == [
        ("human", "what now?"), ("ai", "Still here."), ("human", "clean up"), ("ai", ""),
        messages[-2], ("ai", "done (deleted a.txt)"),
    ]


async def test_chat_server_with_an_agent_chats_with_that_assistant_alone(database_logins, tmp_path: Path, scripted):
    from tests.tool_folders import parrot_agent

    parrot_agent(tmp_path / "sub_graphs")
    eve, parrots, others = {"ORCHESTRATOR_API_KEY": "key-eve"}, f"p-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    model = scripted("the orchestrator speaks", "the parrot speaks", "the orchestrator again")
    async with served(
        database_logins, tmp_path, model, keys={"key-eve": "eve"}, sub_graphs=tmp_path / "sub_graphs"
    ) as server:

        def chat(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
            return run_cli("chat", "--server", server.url, *args, cwd=tmp_path, env=eve, stdin=stdin)

        orchestrator = await asyncio.to_thread(chat, "--session", others, stdin="hello\n")
        parrot = await asyncio.to_thread(chat, "--agent", "parrot", "--session", parrots, stdin="hi\n")
        again = await asyncio.to_thread(chat, "--continue", stdin="hello again\n/sessions\n")
        latest = await asyncio.to_thread(chat, "--agent", "parrot", "--continue", stdin="/sessions\n")
        crossed = await asyncio.to_thread(chat, "--session", parrots, stdin="hey\n")
        unknown = await asyncio.to_thread(chat, "--agent", "nobody", stdin="hi\n")

    assert parrot.returncode == 0, parrot.stderr
    assert "Chatting with the agent parrot alone." in parrot.stderr
    assert "the parrot speaks" in parrot.stdout and "You are parrot" in model.received[1][0].text
    resume = f"chat --server {server.url} --agent parrot --session {parrots}"
    assert f"session {parrots} kept · orchestrator {resume}" in parrot.stderr
    assert "the orchestrator speaks" in orchestrator.stdout
    assert f"session {others} ·" in again.stderr, "--continue: the orchestrator's latest chat, not the agent's newer one"
    assert "the orchestrator again" in again.stdout and parrots not in again.stdout
    assert f"session {parrots} ·" in latest.stderr, "--agent --continue: the agent's latest chat, not the newer one"
    assert f"{parrots} (this one)" in latest.stdout
    assert others not in latest.stdout, "/sessions with --agent: that agent's chats"
    assert crossed.returncode == 1
    assert f"session {parrots} is a chat with another assistant (thread {parrots} belongs to assistant parrot)" in crossed.stderr
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "error: the server offers no agent nobody (it offers orchestrator, parrot; agent folders are offered "
        "with `serve --agents`)"
    )
