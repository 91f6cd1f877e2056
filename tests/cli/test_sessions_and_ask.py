"""Issue 27's terminal items: sessions, the terminal, `ask`, and how costs are written."""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path

from rich.console import Console

from orchestrator.cli.cost import cost_table, turn_cost_line
from orchestrator.conversation.turns import TurnResult
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, Usage
from orchestrator.usage.meter import UsageMeter
from orchestrator.usage.money import usd
from orchestrator.usage.tokens import TokenCount
from tests.helpers import server_env

SCIENTIFIC = re.compile(r"\d[eE][-+]?\d")
LOCAL_PRICES = json.dumps({"local-llm": {"input": 1.0, "output": 2.0}})  # $ per million


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- item 19 (part): costs in fixed-point dollars, null where a price is unknown ----------------


def test_small_costs_are_written_in_fixed_point():
    assert usd(0.0000045) == "$0.0000045"
    assert usd(0.000195) == "$0.000195"
    assert usd(0.0000012345) == "$0.00000123"
    assert usd(0.0000001) == "< $0.000001"
    assert usd(0.0123) == "$0.0123"
    assert usd(1.5) == "$1.50"


def test_the_turn_line_and_cost_table_never_use_scientific_notation():
    meter = UsageMeter()
    meter.add_model("tiny-model", TokenCount(input=3, output=1), 0.0000045, seconds=0.1)
    result = TurnResult(answer="ok", answer_id="m1", iterations=1, usage=meter.turn)
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    console.print(cost_table(meter))
    table = console.file.getvalue()  # type: ignore[attr-defined]

    line = turn_cost_line(result)
    assert line is not None and line.endswith("$0.0000045")
    assert "$0.0000045" in table
    assert not SCIENTIFIC.search(table) and not SCIENTIFIC.search(line)


def test_usage_json_total_is_null_when_a_price_is_unknown_like_ask_json(cli, tmp_path: Path):
    user = unique("u")
    reply = RawReply(text="One.", usage=Usage(30, 3), model="mystery")
    with OpenAICompatibleServer([reply]) as server:
        env = {**server_env(server), "ORCHESTRATOR_MODEL_PRICES": LOCAL_PRICES}
        asked = cli("ask", "--json", "--user", user, "first", cwd=tmp_path, env_extra=env)
    usage = cli("usage", "--user", user, "--json", cwd=tmp_path)

    assert asked.returncode == 0 and usage.returncode == 0, usage.stderr
    assert json.loads(asked.stdout)["cost_usd"] is None
    body = json.loads(usage.stdout)
    assert body["total"]["cost_usd"] is None
    assert [day["cost_usd"] for day in body["days"].values()] == [None]
    assert body["total"]["price_unknown"] == ["mystery"]


# --- item 15: `ask` reads piped input; `--json` keeps its keys; a budget stop fails ------------


def local_reply(reply: str) -> RawReply:
    return RawReply(text=reply, usage=Usage(1_000, 500), model="local-llm")


def sent(server: OpenAICompatibleServer) -> str:
    """The last user message of the server's first request."""
    return server.requests[0]["messages"][-1]["content"]


def test_ask_sends_piped_input_before_the_message(cli, tmp_path: Path):
    with OpenAICompatibleServer(["Summed up."]) as server:
        done = cli("ask", "summarize this", cwd=tmp_path, stdin="line one\nline two\n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert sent(server) == "line one\nline two\n\nsummarize this"


def test_ask_dash_sends_standard_input_alone_and_refuses_it_empty(cli, tmp_path: Path):
    with OpenAICompatibleServer(["Read it."]) as server:
        done = cli("ask", "-", cwd=tmp_path, stdin="what is in here?\n", env_extra=server_env(server))
        empty = cli("ask", "-", cwd=tmp_path, stdin="  \n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert sent(server) == "what is in here?\n"
    assert empty.returncode == 1 and len(server.requests) == 1
    assert empty.stderr.strip() == "error: `ask -` sends standard input, and it was empty"


def test_piped_input_is_no_answer_to_a_question(cli, tmp_path: Path):
    from tests.tool_folders import write_folder

    write_folder(tmp_path / "sub_graphs", "echo")
    with OpenAICompatibleServer(["Fine."]) as server:
        done = cli("ask", "look", cwd=tmp_path, stdin="y\n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert "(end of input: not approved)" in done.stderr, "the piped 'y' approved nothing"
    assert sent(server) == "y\n\nlook"
    assert "echo_say" not in {t["function"]["name"] for t in server.requests[0].get("tools", [])}


def test_ask_json_has_the_same_keys_answered_failed_and_stopped_by_a_budget(cli, tmp_path: Path):
    from http import HTTPStatus

    from orchestrator.testing import ErrorReply

    prices = {"ORCHESTRATOR_MODEL_PRICES": LOCAL_PRICES}
    budget = {**prices, "ORCHESTRATOR_MAX_SESSION_COST_USD": "0.002"}  # one turn spends it
    session = unique("s")
    ask = ("ask", "--json", "--session", session)
    with OpenAICompatibleServer([local_reply("One."), ErrorReply(HTTPStatus.BAD_GATEWAY, "down")]) as server:
        answered = cli(*ask, "first", cwd=tmp_path, env_extra={**server_env(server), **prices})
        stopped = cli(*ask, "second", cwd=tmp_path, env_extra={**server_env(server), **budget})
        failed = cli("ask", "--json", "third", cwd=tmp_path, env_extra={**server_env(server), **prices})

    bodies = [json.loads(done.stdout) for done in (answered, stopped, failed)]
    assert [done.returncode for done in (answered, stopped, failed)] == [0, 3, 1]
    assert set(bodies[0]) == set(bodies[1]) == set(bodies[2])
    assert {"answer", "error", "budget_stop", "usage", "cost_usd", "session_id", "compacted"} <= set(bodies[0])
    assert bodies[0]["error"] is None and bodies[1]["budget_stop"]["scope"] == "session"
    assert bodies[2]["answer"] is None and "502" in bodies[2]["error"]


def test_plain_ask_stopped_by_a_budget_exits_non_zero(cli, tmp_path: Path):
    prices = {"ORCHESTRATOR_MODEL_PRICES": LOCAL_PRICES}
    budget = {**prices, "ORCHESTRATOR_MAX_SESSION_COST_USD": "0.002"}  # one turn spends it
    ask = ("ask", "--session", unique("s"))
    with OpenAICompatibleServer([local_reply("One.")]) as server:
        first = cli(*ask, "first", cwd=tmp_path, env_extra={**server_env(server), **prices})
        stopped = cli(*ask, "second", cwd=tmp_path, env_extra={**server_env(server), **budget})

    assert first.returncode == 0, first.stderr
    assert stopped.returncode == 3, stopped.stderr
    assert stopped.stdout.startswith("Stopped before passing the session budget")


# --- item 12: sessions listed, continued, resumed; the way back runs as printed ----------------


def test_sessions_list_shows_each_session_latest_first(cli, tmp_path: Path):
    user, older, newer = unique("u"), unique("old"), unique("new")
    with OpenAICompatibleServer(["One.", "Two.", "Three."]) as server:
        for session, text in ((older, "plan my trip to Lisbon"), (newer, "what is 2+2"), (newer, "and 3+3")):
            done = cli("ask", "-u", user, "-s", session, text, cwd=tmp_path, env_extra=server_env(server))
            assert done.returncode == 0, done.stderr
    empty = unique("empty")  # opened and left at once: nothing to go back to
    assert cli("chat", "-u", user, "-s", empty, cwd=tmp_path, stdin="/exit\n").returncode == 0
    listed = cli("sessions", "list", "-u", user, cwd=tmp_path)
    as_json = cli("sessions", "list", "-u", user, "--json", cwd=tmp_path)
    nobody = cli("sessions", "list", "-u", unique("nobody"), cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if older in line or newer in line]
    assert [newer in rows[0], older in rows[1]] == [True, True], listed.stdout
    assert "plan my trip to Lisbon" in rows[1] and "what is 2+2" in rows[0]
    body = json.loads(as_json.stdout)["sessions"]
    assert [(s["session_id"], s["turns"]) for s in body] == [(newer, 2), (older, 1)], "not the empty one"
    assert empty not in listed.stdout
    assert body[1]["first_words"] == "plan my trip to Lisbon" and body[0]["last_turn"] >= body[0]["started"]
    assert nobody.returncode == 0 and "No sessions of" in nobody.stdout


def test_chat_continue_goes_on_with_the_latest_session(cli, tmp_path: Path):
    user, first, latest = unique("u"), unique("a"), unique("b")
    with OpenAICompatibleServer(["One.", "Two.", "Three."]) as server:
        for session, text in ((first, "My name is Ada."), (latest, "My name is Bo.")):
            cli("ask", "-u", user, "-s", session, text, cwd=tmp_path, env_extra=server_env(server))
        done = cli("chat", "-u", user, "--continue", cwd=tmp_path, stdin="Who am I?\n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    contents = [m["content"] for m in server.requests[2]["messages"]]
    assert "My name is Bo." in contents and "My name is Ada." not in contents
    assert f"session {latest} kept" in done.stderr


def test_chat_resume_offers_the_recent_sessions_to_pick_from(cli, tmp_path: Path):
    user, first, latest = unique("u"), unique("a"), unique("b")
    with OpenAICompatibleServer(["One.", "Two.", "Three."]) as server:
        for session, text in ((first, "My name is Ada."), (latest, "My name is Bo.")):
            cli("ask", "-u", user, "-s", session, text, cwd=tmp_path, env_extra=server_env(server))
        stdin = "7\n2\nWho am I?\n"  # 7 is no choice: asked again
        done = cli("chat", "-u", user, "--resume", cwd=tmp_path, stdin=stdin, env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert first in done.stderr and latest in done.stderr, "both are offered"
    assert "Please give a number from 1 to 2" in done.stderr
    contents = [m["content"] for m in server.requests[2]["messages"]]
    assert "My name is Ada." in contents and "My name is Bo." not in contents
    assert f"session {first} kept" in done.stderr


def test_an_unknown_session_id_says_it_starts_a_new_one(cli, tmp_path: Path):
    session = unique("fresh")
    first = cli("chat", "-s", session, cwd=tmp_path, stdin="hello\n")
    again = cli("chat", "-s", session, cwd=tmp_path, stdin="")
    both = cli("chat", "-s", session, "--continue", cwd=tmp_path)

    assert f"no session {session} of yours yet: starting a new one" in first.stderr
    assert "starting a new one" not in again.stderr
    assert both.returncode == 2 and "one of --session, --continue and --resume" in both.stderr


def test_the_way_back_is_the_command_as_run_from_here(monkeypatch, tmp_path: Path):
    from orchestrator.terminal.invocation import command_name

    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("orchestrator", "python"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")

    monkeypatch.setattr("sys.argv", [str(bin_dir / "orchestrator"), "chat"])
    assert command_name() == ".venv/bin/orchestrator", "not on PATH: the path from here"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert command_name() == "orchestrator", "on PATH: its name"

    monkeypatch.setattr("sys.argv", ["/somewhere/orchestrator/__main__.py", "chat"])
    monkeypatch.setattr("sys.executable", str(bin_dir / "python"))
    assert command_name() == "python -m orchestrator"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_name() == ".venv/bin/python -m orchestrator"


def test_the_exit_line_of_a_real_chat_runs_as_printed(tmp_path: Path, database_url: str):
    import subprocess
    import sys

    from tests.helpers import cli_env

    env = {**cli_env(tmp_path), "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none"}
    env["PATH"] = "/usr/bin:/bin"  # orchestrator's environment is not on it
    chat = subprocess.run(
        [sys.executable, "-m", "orchestrator", "chat"], input="", capture_output=True, text=True,
        cwd=tmp_path, env=env, timeout=120, start_new_session=True,
    )
    [line] = [line for line in chat.stderr.splitlines() if " kept · " in line]
    command = line.split(" kept · ")[1]
    assert command.startswith(f"{sys.executable} -m orchestrator chat --session ")

    again = subprocess.run(
        command.replace(" chat --session ", " sessions list --json #"), shell=True,
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )
    assert again.returncode == 0, again.stderr


# --- item 14: at the terminal ---------------------------------------------------------------------


class Keys:
    """A LineSource of scripted keys: a line, CTRL_C, or None (end of input); each read moves the clock."""

    def __init__(self, keys: list[tuple[float, str | None]], now: list[float]) -> None:
        self.keys = keys
        self.now = now
        self.read = 0

    async def readline(self, *, prompt: str = "", default: str = "") -> str | None:
        at, key = self.keys[self.read]
        self.read += 1
        self.now[0] = at
        if key == CTRL_C:
            raise KeyboardInterrupt
        return key


CTRL_C = "\x03"


def scripted_repl(lines: object, **options: object) -> tuple[object, io.StringIO, io.StringIO]:
    from langgraph.checkpoint.memory import InMemorySaver

    from orchestrator.cli.repl import ChatRepl
    from orchestrator.runtime import Orchestrator
    from orchestrator.settings import load_settings
    from orchestrator.terminal.signals import Interrupts
    from orchestrator.testing import ScriptedChatModel

    app = Orchestrator.create(
        load_settings(), model=ScriptedChatModel(steps=["unused"]), tools=[], checkpointer=InMemorySaver()
    )
    out, err = io.StringIO(), io.StringIO()
    repl = ChatRepl(
        runtime=app,
        session=app.session(user_id="u"),
        lines=lines,  # type: ignore[arg-type]
        interrupts=Interrupts(),
        out=Console(file=out, width=200),
        err=Console(file=err, width=200),
        **options,  # type: ignore[arg-type]
    )
    return repl, out, err


async def test_a_ctrl_c_right_after_the_one_that_cancelled_a_turn_does_not_exit():
    import asyncio
    import signal

    now = [100.0]
    keys = Keys([(100.3, CTRL_C), (101.8, CTRL_C), (102.0, "never read")], now)
    repl, _, err = scripted_repl(keys, clock=lambda: now[0])
    started = asyncio.Event()

    async def held() -> None:
        started.set()
        await asyncio.Event().wait()

    running = asyncio.ensure_future(repl._run(held()))
    await started.wait()
    repl.interrupts._received(signal.SIGINT)  # Ctrl-C: what the signal handler does
    assert await running is None, "the turn was cancelled"
    assert await repl.run() == 0

    assert keys.read == 2, "the Ctrl-C 0.3 s later was the same keypress; the one after exited"


async def test_cancel_takes_a_unique_start_of_a_task_id():
    from types import SimpleNamespace

    repl, out, err = scripted_repl(Keys([], [0.0]))
    session_id = repl.session.session_id
    cancelled: list[str] = []

    def task(task_id: str, status: str = "running") -> SimpleNamespace:
        return SimpleNamespace(job_id=task_id, status=status, call=SimpleNamespace(session_id=session_id))

    # a queued task can be cancelled as a running one; an ended one cannot
    tasks = [task("3bb5a1", "queued"), task("3bc0ff"), task("9e0011"), task("9e0012", "completed")]

    async def jobs_of(_: str) -> list[SimpleNamespace]:
        return tasks

    async def cancel_job(task_id: str) -> bool:
        cancelled.append(task_id)
        return True

    repl.runtime = SimpleNamespace(jobs=SimpleNamespace(jobs_of=jobs_of, cancel_job=cancel_job))  # type: ignore[assignment]
    await repl.cancel(["9e"])
    await repl.cancel(["3b"])
    await repl.cancel(["3bb"])

    assert cancelled == ["9e0011", "3bb5a1"]
    assert "3b starts several running jobs' ids: 3bb5a1, 3bc0ff" in err.getvalue()
    assert "cancelling job 9e0011" in out.getvalue()


def test_requests_lists_the_sessions_calls_and_help_shows_reason(cli, tmp_path: Path):
    done = cli("chat", cwd=tmp_path, stdin="what is 2*21\n/requests\n/help\n")

    assert done.returncode == 0, done.stderr
    assert re.search(r"^\S+  calculator  completed  \d+\.\d\ds$", done.stdout, re.MULTILINE), done.stdout
    assert "n [reason] rejects" in done.stdout


def test_help_shows_no_type_after_a_flag(cli, tmp_path: Path):
    shown = cli("chat", "--help", cwd=tmp_path)

    assert shown.returncode == 0
    assert "--continue" in shown.stdout and "<bool>" not in shown.stdout


def test_on_a_terminal_answers_are_markdown_and_tab_completes_a_command(tmp_path: Path, database_url: str):
    from tests.cli.test_signals import Terminal, wait_for_screen

    terminal = Terminal()
    answer = "Here is **bold** text.\n\n- first item\n- second item"
    with OpenAICompatibleServer([answer]) as server:
        chat = terminal.chat(tmp_path, server=server, database_url=database_url)
        try:
            wait_for_screen(terminal.shows("you>"), chat, terminal)
            terminal.type(b"hi\r")
            wait_for_screen(terminal.shows("second item"), chat, terminal)
            terminal.type(b"/requ\t\r")  # Tab completes /requests, the only command starting so
            wait_for_screen(terminal.shows("No tool calls in this session yet."), chat, terminal)
            terminal.type(b"\x04")
            assert chat.wait(timeout=120) == 0
        finally:
            if chat.poll() is None:
                chat.kill()
    screen = bytes(terminal.screen).decode(errors="replace")
    assert "**bold**" not in screen, "the Markdown was rendered, not shown"
    assert "\x1b[1mbold" in screen, "bold"
    assert re.search(r"•\s*(\x1b\[0m)?\s*first item", screen) and "- first item" not in screen, "a list"
