"""Signals, in real processes (one on a real pseudo-terminal): Ctrl-C cancels a turn, SIGTERM and SIGHUP leave nothing behind."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import cli_env, server_env
from tests.tool_folders import GATED_TOOL, write_folder

WAIT_STEPS = 2400  # polls of 50 ms: two minutes, far past any real wait


def start(args: list[str], *, home: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """`orchestrator ARGS` with piped stdin; stdout and stderr go to files in `home`."""
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        stdin=subprocess.PIPE,
        stdout=open(home / "out.txt", "w"),  # noqa: SIM115  # closed with the process
        stderr=open(home / "err.txt", "w"),  # noqa: SIM115
        cwd=home,
        env={**cli_env(home), **env},
        text=True,
        start_new_session=True,
    )


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[str], home: Path) -> None:
    """Poll `condition` (a gate, not a guess at a duration) while the process lives."""
    for _ in range(WAIT_STEPS):
        if condition():
            return
        assert process.poll() is None, (home / "err.txt").read_text()
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting; stderr:\n{(home / 'err.txt').read_text()}")


def said(home: Path, text: str) -> Callable[[], bool]:
    return lambda: text in (home / "err.txt").read_text()


async def test_ctrl_c_cancels_the_turn_and_the_chat_goes_on(
    tmp_path: Path, database_url: str, database: Database
):
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "gated", code=GATED_TOOL.format(started=str(started), gate=str(gate)))
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [[("gated_run", {})], "Still here.", "Hello again."]
    with OpenAICompatibleServer(script) as server:
        env = {**server_env(server), "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none"}
        chat = start(["chat", "-s", session], home=tmp_path, env=env)
        chat.stdin.write("y\nrun it\n")
        chat.stdin.flush()
        wait_until(started.exists, chat, tmp_path)
        chat.send_signal(signal.SIGINT)
        wait_until(said(tmp_path, "cancelled"), chat, tmp_path)
        chat.stdin.write("what now?\n")
        chat.stdin.close()
        assert chat.wait(timeout=120) == 0, (tmp_path / "err.txt").read_text()
        reopened = start(["ask", "--answers-from-stdin", "-s", session, "hi"], home=tmp_path, env=env)
        assert reopened.wait(timeout=120) == 0, (tmp_path / "err.txt").read_text()

    assert (tmp_path / "out.txt").read_text() == "Hello again.\n"
    assert "finishing the interrupted turn" not in (tmp_path / "err.txt").read_text()
    assert "left running by a stopped process" not in (tmp_path / "err.txt").read_text()
    second = server.requests[1]["messages"]
    tool_reply = next(m for m in second if m["role"] == "tool")
    assert json.loads(tool_reply["content"])["error_code"] == "cancelled"
    assert [m["content"] for m in second[-2:]] == ["(The user cancelled this turn.)", "what now?"]
    statuses = [s for s, _ in await request_history(database, started.read_text(), user_id="local")]
    assert statuses[-2:] == ["cancelled", "closed"]
    assert statuses.count("running") == 1, "the cancelled call never ran again"


def test_ask_json_interrupted_still_prints_one_object(tmp_path: Path, database_url: str):
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "gated", code=GATED_TOOL.format(started=str(started), gate=str(gate)))
    with OpenAICompatibleServer([[("gated_run", {})]]) as server:
        env = {**server_env(server), "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none"}
        ask = start(["ask", "--answers-from-stdin", "--json", "-s", "interrupted", "run it"], home=tmp_path, env=env)
        ask.stdin.write("y\n")
        ask.stdin.close()
        wait_until(started.exists, ask, tmp_path)
        ask.send_signal(signal.SIGINT)
        assert ask.wait(timeout=120) == 130

    body = json.loads((tmp_path / "out.txt").read_text())
    assert body["error"] == "interrupted (SIGINT)"
    assert body["session_id"] == "interrupted"
    # the keys of any other ending (issue 27, item 15): no answer, what was spent so far
    assert body["answer"] is None and body["budget_stop"] is None and body["follow_ups"] == []
    assert {"iterations", "tool_calls", "questions", "usage", "cost_usd", "user_id"} <= set(body)


@pytest.mark.db
@pytest.mark.process
def test_sigterm_and_sighup_stop_the_embedded_server(tmp_path: Path):
    pgdata = tmp_path / "data" / "pgdata"
    for number in (signal.SIGTERM, signal.SIGHUP):
        chat = start(["chat"], home=tmp_path, env={"ORCHESTRATOR_EMBEDDINGS": "none"})
        wait_until(said(tmp_path, "/help for commands"), chat, tmp_path)
        assert (pgdata / "postmaster.pid").exists(), "the server runs while the chat does"
        chat.send_signal(number)
        assert chat.wait(timeout=120) == 128 + number
        assert not (pgdata / "postmaster.pid").exists(), f"the server outlived {number.name}"
        pids = json.loads((pgdata / ".handle_pids.json").read_text() or "[]")
        assert chat.pid not in pids


class Terminal:
    """A pseudo-terminal: the controlling terminal of the process started on it."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 35, 120, 0, 0))
        self.screen = bytearray()
        self._lock = threading.Lock()

    def controlling(self) -> None:
        """In the child: a session of its own, this terminal its controlling one."""
        os.setsid()
        fcntl.ioctl(self.slave, termios.TIOCSCTTY, 0)

    def chat(self, tmp_path: Path, *, server: OpenAICompatibleServer, database_url: str) -> subprocess.Popen[bytes]:
        """`orchestrator chat` in `tmp_path` on this terminal, against `server`; read from now on."""
        env = {**cli_env(tmp_path), **server_env(server), "TERM": "xterm"}
        env |= {"DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none"}
        chat = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "chat"],
            stdin=self.slave, stdout=self.slave, stderr=self.slave,
            cwd=tmp_path, env=env, preexec_fn=self.controlling,  # noqa: PLW1509
        )
        self.read_on()
        return chat

    def read_on(self) -> None:
        os.close(self.slave)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:  # the child has gone
                return
            if not data:
                return
            if b"\x1b[6n" in data:  # prompt_toolkit asks where the cursor is: answer
                os.write(self.master, b"\x1b[1;1R")
            with self._lock:
                self.screen.extend(data)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def shows(self, text: str, *, after: str = "") -> Callable[[], bool]:
        """Whether `text` is on the screen (after the last `after`)."""

        def shown() -> bool:
            screen = bytes(self.screen)
            start = screen.rfind(after.encode()) if after else 0
            return start >= 0 and text.encode() in screen[start:]

        return shown


def test_ctrl_c_on_a_terminal_cancels_the_turn(tmp_path: Path, database_url: str):
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "gated", code=GATED_TOOL.format(started=str(started), gate=str(gate)))
    terminal = Terminal()
    with OpenAICompatibleServer([[("gated_run", {})], "Still here."]) as server:
        chat = terminal.chat(tmp_path, server=server, database_url=database_url)
        try:
            wait_for_screen(terminal.shows("Approve and load it?"), chat, terminal)
            terminal.type(b"y\r")
            wait_for_screen(terminal.shows("you>"), chat, terminal)
            terminal.type(b"run it\r")
            wait_for_screen(started.exists, chat, terminal)
            terminal.type(b"\x03")  # Ctrl-C: the terminal sends SIGINT
            wait_for_screen(terminal.shows("cancelled"), chat, terminal)
            terminal.type(b"what now?\r")
            wait_for_screen(terminal.shows("you>", after="Still here."), chat, terminal)
            terminal.type(b"\x04")  # Ctrl-D at the prompt ends the chat
            assert chat.wait(timeout=120) == 0, bytes(terminal.screen).decode(errors="replace")
        finally:
            if chat.poll() is None:
                chat.kill()
    assert [r["messages"][-1]["content"] for r in server.requests] == ["run it", "what now?"]


def wait_for_screen(condition: Callable[[], bool], process: subprocess.Popen[bytes], terminal: Terminal) -> None:
    for _ in range(WAIT_STEPS):
        if condition():
            return
        assert process.poll() is None, bytes(terminal.screen).decode(errors="replace")
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting; the screen:\n{bytes(terminal.screen).decode(errors='replace')}")
