"""The warm process: started by a command run the long way, running the next ones as forks.

Real `orchestrator` processes, each test with a runtime folder of its own (so a
warm process of its own); whatever a test leaves running is stopped at its end.
The waits are for files and processes, never a sleep.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.testing import Endless, OpenAICompatibleServer
from orchestrator.warm import control
from orchestrator.warm.child import forget_environment_caches
from orchestrator.warm.client import run_warm
from orchestrator.warm.fingerprint import PACKAGE
from orchestrator.warm.protocol import path_in, runtime_dir
from tests.helpers import cli_env, server_env
from tests.mcp.test_serve import answer, stdio_session
from tests.store.test_embedded_server import alive, wait_until
from tests.tool_folders import write_folder

pytestmark = pytest.mark.process


@dataclass
class Warm:
    """A home, a runtime folder for the warm process, and the commands' environment."""

    home: Path
    env: dict[str, str]

    @property
    def folder(self) -> Path:
        found = runtime_dir(create=False)
        assert found is not None
        return found

    def command(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            capture_output=True, text=True, cwd=cwd or self.home, env=self.env | env,
            timeout=120, start_new_session=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.home,
            env=self.env | env, start_new_session=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def log(self) -> str:
        return path_in(self.folder, "log").read_text() if path_in(self.folder, "log").exists() else ""

    def running(self) -> control.WarmState:
        """The warm process, once it listens (a command run the long way started it)."""
        wait_until(lambda: path_in(self.folder, "sock").exists() and control.state() is not None, "the warm process")
        state = control.state()
        assert state is not None
        return state


@pytest.fixture
def warm(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Warm]:
    runtime = tmp_path_factory.mktemp("run")
    runtime.chmod(0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    env = cli_env(tmp_path) | {"XDG_RUNTIME_DIR": str(runtime), "ORCHESTRATOR_WARM_MINUTES": "5", "ORCHESTRATOR_EMBEDDINGS": "none"}
    yield Warm(tmp_path, env)
    stopped = control.stop()
    if stopped is not None:
        wait_until(lambda: not alive(stopped.pid), "the warm process to stop")


def test_a_command_run_the_long_way_starts_the_warm_process_which_runs_the_next(warm: Warm) -> None:
    first = warm.command("ask", "what time is it?")
    assert first.returncode == 0, first.stderr
    process = warm.running()
    assert "runs `ask`" not in warm.log()

    second = warm.command("ask", "what time is it?")

    assert second.returncode == 0, second.stderr
    assert "current_time" in second.stdout and second.stdout.count("\n") == first.stdout.count("\n")
    assert "runs `ask`" in warm.log() and "ended with 0" in warm.log()
    assert control.state() == process  # the same warm process, still there
    status = warm.command("warm", "status")
    assert f"running since {process.since:%Y-%m-%d} " in status.stdout and f"(pid {process.pid})" in status.stdout


def test_a_forked_command_has_its_own_directory_environment_and_exit_status(warm: Warm, tmp_path: Path) -> None:
    assert warm.command("ask", "hello").returncode == 0
    warm.running()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    moved = warm.command("ask", "hello", cwd=elsewhere, ORCHESTRATOR_HOME="relative-home")
    refused = warm.command("ask", "hello", ORCHESTRATOR_RAG_MATCH_COUNT="999")
    long_way = warm.command("ask", "hello", ORCHESTRATOR_RAG_MATCH_COUNT="999", ORCHESTRATOR_WARM_MINUTES="0")

    assert moved.returncode == 0, moved.stderr
    assert (elsewhere / "relative-home" / "data").is_dir()  # its working directory and variables
    assert refused.returncode == long_way.returncode != 0
    assert refused.stderr == long_way.stderr and "ORCHESTRATOR_RAG_MATCH_COUNT" in refused.stderr
    assert warm.log().count("runs `ask`") == 2


def test_ctrl_c_reaches_the_command_and_a_command_killed_ends_its_fork(warm: Warm) -> None:
    with OpenAICompatibleServer([Endless(""), Endless("")]) as server:
        env = server_env(server)
        assert warm.command("ask", "hello").returncode == 0
        warm.running()

        interrupted = warm.start("ask", "hello", **env)
        wait_until(lambda: len(server.requests) == 1, "the command's model call")
        interrupted.send_signal(signal.SIGINT)
        _, stderr = interrupted.communicate(timeout=120)
        assert interrupted.returncode == 130 and "stopped (SIGINT)" in stderr  # as the long way says

        killed = warm.start("ask", "hello", **env)
        wait_until(lambda: len(server.requests) == 2, "the second model call")
        fork = int(warm.log().split("runs `ask`")[-2].rsplit("pid ", 1)[1].split()[0])
        killed.kill()
        killed.wait(timeout=120)
        wait_until(lambda: not alive(fork), "the fork of a killed command to end")
        wait_until(lambda: f"pid {fork} ended" in warm.log(), "the warm process to see it end")


def test_a_question_goes_to_the_commands_terminal_when_its_input_is_a_pipe(warm: Warm) -> None:
    assert warm.command("ask", "hello").returncode == 0
    warm.running()
    write_folder(warm.home / "sub_graphs", "echo")
    terminal, own = os.openpty()

    def controlling_terminal() -> None:  # the command's, as at a shell (after its setsid)
        fcntl.ioctl(own, termios.TIOCSCTTY, 0)

    command = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "ask", "hello"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=warm.home,
        start_new_session=True, preexec_fn=controlling_terminal, pass_fds=(own,), env=warm.env,
    )  # fmt: skip
    os.close(own)
    assert command.stdin is not None
    command.stdin.write("piped text\n")
    command.stdin.close()
    command.stdin = None
    shown = _read_until(terminal, "Approve and load it?")
    os.write(terminal, b"y\n")
    _, stderr = command.communicate(timeout=120)
    os.close(terminal)

    assert command.returncode == 0, stderr
    assert "echo" in shown and "runs `ask`" in warm.log()
    listed = warm.command("tools", "list").stdout
    assert "echo" in listed and "approved" in listed


def _read_until(terminal: int, text: str) -> str:
    seen = ""
    deadline = time.monotonic() + 120
    while text not in seen:
        assert time.monotonic() < deadline, f"gave up waiting for {text!r} on the terminal: {seen!r}"
        if select.select([terminal], [], [], 1.0)[0]:
            try:
                seen += os.read(terminal, 4096).decode(errors="replace")
            except OSError:  # EIO: the command closed it
                break
    return seen


async def test_mcp_serve_is_forked_too_and_serves_over_the_clients_pipes(warm: Warm) -> None:
    assert warm.command("ask", "hello").returncode == 0
    warm.running()
    write_folder(warm.home / "sub_graphs", "echo")
    assert warm.command("tools", "approve", "echo").returncode == 0

    async with stdio_session(warm.home, warm.env) as session:
        listed = [tool.name for tool in (await session.list_tools()).tools]
        said = await session.call_tool("echo_say", {"text": "hi", "times": 2})

    assert listed == ["echo_say"]
    assert not said.isError and answer(said) == {"status": "success", "message": "hi hi"}
    assert "runs `mcp`" in warm.log()


def test_code_changed_under_the_warm_process_is_declined_and_a_new_one_started(warm: Warm) -> None:
    assert warm.command("ask", "hello").returncode == 0
    old = warm.running()
    changed = PACKAGE / "warm" / "fingerprint.py"
    times = changed.stat()
    os.utime(changed, ns=(times.st_atime_ns, times.st_mtime_ns + 1_000_000_000))
    try:
        declined = warm.command("ask", "hello")
    finally:
        os.utime(changed, ns=(times.st_atime_ns, times.st_mtime_ns))

    assert declined.returncode == 0, declined.stderr
    assert "declined a command: the installed code changed" in warm.log()
    wait_until(lambda: not alive(old.pid), "the old warm process to end")
    assert warm.running().pid != old.pid  # the command, run the long way, started a new one


def test_warm_stop_and_the_idle_time_end_it(warm: Warm) -> None:
    assert warm.command("ask", "hello").returncode == 0
    process = warm.running()

    stopped = warm.command("warm", "stop")

    assert stopped.stdout.strip() == f"stopped the warm process (pid {process.pid})"
    wait_until(lambda: not alive(process.pid), "the warm process to stop")
    assert not path_in(warm.folder, "sock").exists()
    assert "not running" in warm.command("warm", "status").stdout

    assert warm.command("ask", "hello", ORCHESTRATOR_WARM_MINUTES="0.01").returncode == 0
    # Read from its log: it may be gone by the time it could be asked (0.6 s).
    wait_until(lambda: "idle after 0.01 min" in warm.log(), "a warm process with the short idle time")
    idle = int(warm.log().rsplit("warm: pid ", 1)[1].split(",")[0])
    wait_until(lambda: not alive(idle), "the idle warm process to stop")
    assert "stopping (idle)" in warm.log() and control.state() is None


def test_none_is_started_at_zero_minutes_nor_in_a_folder_others_may_write(
    warm: Warm, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert warm.command("ask", "hello", ORCHESTRATOR_WARM_MINUTES="0").returncode == 0
    assert not (Path(warm.env["XDG_RUNTIME_DIR"]) / f"orchestrator-warm-{os.getuid()}").exists()  # none started

    shared = tmp_path_factory.mktemp("shared")
    (shared / f"orchestrator-warm-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(shared / f"orchestrator-warm-{os.getuid()}", 0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    assert runtime_dir(create=True) is None
    assert run_warm(["ask", "hello"]) is None
    assert control.start(minutes=5, environment=dict(os.environ)) is False
    assert warm.command("ask", "hello", XDG_RUNTIME_DIR=str(shared)).returncode == 0
    assert not list((shared / f"orchestrator-warm-{os.getuid()}").glob("warm-*"))


def test_a_fork_reads_again_what_langsmith_cached_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from langsmith import utils

    monkeypatch.setenv("LANGSMITH_RUNS_ENDPOINTS", "before")
    assert utils.get_env_var("RUNS_ENDPOINTS") == "before"  # as the warm process read it
    monkeypatch.setenv("LANGSMITH_RUNS_ENDPOINTS", "the command's")

    forget_environment_caches()

    assert utils.get_env_var("RUNS_ENDPOINTS") == "the command's"


def test_the_client_loads_only_the_standard_library() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, orchestrator.launch; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    ours = [name for name in loaded if name.split(".")[0] == "orchestrator"]
    assert set(ours) <= {"orchestrator", "orchestrator.launch", "orchestrator.collector", "orchestrator.lazy",
                         "orchestrator.version", "orchestrator.warm", "orchestrator.warm.client",
                         "orchestrator.warm.protocol"}  # fmt: skip
    assert not {"pydantic", "yaml", "typer", "langchain_core"} & set(loaded)
