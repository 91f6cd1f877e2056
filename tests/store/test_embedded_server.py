"""The embedded server is not orphaned: departed users are dropped, the last one stops it.

Real processes join a server of the test's own (a fresh data directory each);
the test stops it afterwards whatever happened. The last tests run `orchestrator`
itself and end it while the server is still starting.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import psycopg
import pytest

from orchestrator.store.embedded import PGDATA, drop_departed, leave_embedded_server
from tests.helpers import cli_env

# A user of the server: joins, says so through a marker file (its admin URL),
# then waits for the test to close its stdin, leaving explicitly (twice: it is
# idempotent) if told "leave", else through the atexit hook.
USER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from orchestrator.store.embedded import (
        embedded_database_url, leave_embedded_server, revive_embedded_server,
    )

    data_dir, marker = Path(sys.argv[1]), Path(sys.argv[2])
    url = embedded_database_url(data_dir)
    marker.with_suffix(".partial").write_text(url)
    marker.with_suffix(".partial").rename(marker)
    commands = sys.stdin.read().split()
    if "revive" in commands:
        assert revive_embedded_server(data_dir)
    if "leave" in commands:
        leave_embedded_server()
        leave_embedded_server()
    """
)

WAIT_SECONDS = 120  # an upper bound only (initdb and the first start take a few seconds)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until it holds; fail after WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Server:
    """The embedded server of one data directory and the processes using it."""

    data_dir: Path
    users: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / PGDATA

    def join(self) -> tuple[subprocess.Popen[str], str]:
        """A new process that joined the server, and the admin URL it got."""
        marker = self.data_dir.parent / f"joined-{len(self.users)}"
        stderr = marker.with_suffix(".err")
        with open(stderr, "w") as err:
            user = subprocess.Popen(
                [sys.executable, "-c", USER, str(self.data_dir), str(marker)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True,
            )
        self.users.append(user)
        wait_until(lambda: marker.exists() or user.poll() is not None, "a process to join")
        assert marker.exists(), stderr.read_text()
        return user, marker.read_text()

    def kill(self, user: subprocess.Popen[str]) -> None:
        """SIGKILL `user`: no atexit hook, no cleanup of any kind."""
        user.kill()
        user.communicate(timeout=WAIT_SECONDS)

    def leave(self, user: subprocess.Popen[str], *, explicitly: bool, revive: bool = False) -> None:
        """Let `user` leave (by calling leave_embedded_server, or just by exiting).

        With `revive`, it first starts the server again (as after a crash under it).
        """
        commands = ("revive\n" if revive else "") + ("leave\n" if explicitly else "")
        user.communicate(commands, timeout=WAIT_SECONDS)
        assert user.returncode == 0

    def listed(self) -> list[int]:
        """The pids the package counts as using the server (none before it wrote its list)."""
        listing = self.pgdata / ".handle_pids.json"
        return json.loads(listing.read_text()) if listing.exists() else []

    def postmaster(self) -> int | None:
        """The server's pid while it runs.

        Not just whether postmaster.pid exists: where pg_ctl cannot stop the
        server (as root, the server's user may lose access to a pytest temporary
        directory another pytest session makes private again) the package kills
        it instead, and the file stays.
        """
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return None
        pid = int(pid_file.read_text().splitlines()[0])
        return pid if alive(pid) else None

    def wait_stopped(self) -> None:
        """Wait for the server to be gone (without the fix it never goes: this fails).

        A stop by pg_ctl is over when the last user has exited, but the package's
        fallback (kill the postmaster) does not wait for the process to die.
        """
        wait_until(lambda: self.postmaster() is None, "the server to stop")

    def tear_down(self) -> None:
        """Kill the users still running and stop the server if it still runs."""
        for user in self.users:
            if user.poll() is None:
                self.kill(user)
        pid = self.postmaster()
        if pid is None:
            return
        # A signal, not pg_ctl: pg_ctl refuses to run as root, where the package
        # runs the server as another user. SIGINT is PostgreSQL's fast shutdown.
        postmaster = psutil.Process(pid)
        postmaster.send_signal(signal.SIGINT)
        try:
            postmaster.wait(timeout=WAIT_SECONDS)
        except psutil.TimeoutExpired:
            postmaster.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server of the test's own, stopped afterwards even if the test failed."""
    server = Server(tmp_path / "data")
    try:
        yield server
    finally:
        server.tear_down()


@pytest.mark.db
@pytest.mark.process
def test_a_killed_user_is_dropped_and_the_last_one_left_stops_the_server(server: Server) -> None:
    killed, _ = server.join()
    postmaster = server.postmaster()
    assert postmaster is not None
    assert server.listed() == [killed.pid]
    server.kill(killed)
    assert server.listed() == [killed.pid]  # what the package alone leaves behind

    last, _ = server.join()
    assert server.listed() == [last.pid]  # dropped on joining
    assert server.postmaster() == postmaster  # joined the running server

    # One more dies while `last` still uses the server: dropped on leaving.
    also_killed, _ = server.join()
    assert server.listed() == [last.pid, also_killed.pid]
    server.kill(also_killed)

    server.leave(last, explicitly=True)
    assert server.listed() == []
    server.wait_stopped()
    assert not alive(postmaster)


@pytest.mark.db
@pytest.mark.process
def test_a_live_user_is_never_dropped(server: Server) -> None:
    first, url = server.join()
    second, _ = server.join()
    assert server.listed() == [first.pid, second.pid]

    server.leave(second, explicitly=False)  # the atexit path
    assert server.listed() == [first.pid]
    with psycopg.connect(url) as connection:  # still serving the one left
        assert connection.execute("SELECT 1").fetchone() == (1,)

    server.leave(first, explicitly=False)
    assert server.listed() == []
    server.wait_stopped()


@pytest.mark.db
@pytest.mark.process
def test_the_departed_are_dropped_from_the_pid_file(tmp_path: Path) -> None:
    """Without a server: what counts as gone (exited, zombie, reused pid) and what stays."""
    pid_file = tmp_path / ".handle_pids.json"
    assert drop_departed(pid_file) == []
    assert not pid_file.exists()  # never created: a new pgdata must stay empty for initdb

    def child() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, text=True
        )

    live, zombie, exited = child(), child(), child()
    try:
        exited.communicate("")
        zombie.kill()  # and not reaped: it stays in the process table
        wait_until(
            lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE, "a zombie"
        )
        pid_file.write_text(json.dumps([os.getpid(), live.pid, zombie.pid, exited.pid]))
        assert drop_departed(pid_file) == [os.getpid(), live.pid]
        assert json.loads(pid_file.read_text()) == [os.getpid(), live.pid]

        # Last written an hour before `live` started: its pid was reused, `live`
        # cannot have written it. This process is kept regardless.
        written_at = psutil.Process(live.pid).create_time() - 3600
        os.utime(pid_file, (written_at, written_at))
        assert drop_departed(pid_file) == [os.getpid()]
    finally:
        for process in (live, zombie, exited):
            process.kill()
            process.communicate()


@pytest.mark.db
@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="as root the server runs as a user of its own")
@pytest.mark.parametrize("explicitly", [True, False], ids=["leave", "exit"])
def test_as_root_the_last_user_stops_the_server_cleanly_past_a_private_folder(
    server: Server, explicitly: bool
) -> None:
    """Private folders (0700, root's) above pgdata keep the server's user out; the stop needs no way in."""
    user, _ = server.join()
    postmaster = server.postmaster()
    assert postmaster is not None
    server.data_dir.chmod(0o700)

    server.leave(user, explicitly=explicitly)

    assert not alive(postmaster)
    assert not (server.pgdata / "postmaster.pid").exists(), "the server removed it: no crash"
    log = (server.pgdata / "log").read_text().splitlines()
    assert log[-1].endswith("database system is shut down"), log[-3:]
    assert "killing" not in (server.data_dir.parent / "joined-0.err").read_text()


def test_leaving_without_having_joined_does_nothing(tmp_path: Path) -> None:
    leave_embedded_server(tmp_path)
    leave_embedded_server(tmp_path)
    assert not (tmp_path / PGDATA).exists()


@pytest.mark.db
@pytest.mark.process
def test_a_server_another_user_restarted_is_stopped_by_the_last_one_to_leave(server: Server) -> None:
    reviver, _ = server.join()
    last, _ = server.join()
    crashed = server.postmaster()
    assert crashed is not None
    psutil.Process(crashed).kill()
    # Gone for good, not a zombie: the package would take a zombie for a running server.
    wait_until(lambda: not psutil.pid_exists(crashed), "the server to die")

    server.leave(reviver, explicitly=True, revive=True)  # started again, then left
    restarted = server.postmaster()
    assert restarted is not None and restarted != crashed
    assert server.listed() == [last.pid]

    server.leave(last, explicitly=True)  # it only saw the postmaster that died
    server.wait_stopped()
    assert not alive(restarted)


# Logged (at INFO) by a command that ends while its database is starting, before it waits.
WAITING = "waiting for the database to finish starting"


def orchestrator(
    *args: str, home: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`orchestrator ARGS` with `home` as its home (its data directory is `home/data`).

    No terminal and an empty stdin; stderr goes to `home/err.txt`.
    """
    with open(home / "err.txt", "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, cwd=home, text=True,
            env={**cli_env(home), "ORCHESTRATOR_EMBEDDINGS": "none", **(env or {})},
            start_new_session=True,
        )


def frozen_pg_ctl(command: subprocess.Popen[str]) -> psutil.Process:
    """The `pg_ctl start` that `command` runs, caught and stopped (SIGSTOP).

    This is the gate for "while the server starts": the package lists the
    process as a user of the server only once pg_ctl has returned, so as long as
    pg_ctl is stopped the command is mid-start, whatever else it is doing. (An
    environment hook would need code in the product for the tests' sake; a gate
    on postmaster.pid alone could open after the start is over.) pg_ctl runs
    for a second or so, far longer than one poll; the package gives it 10 s in
    all, so it must be resumed well before then.
    """
    parent = psutil.Process(command.pid)

    def caught() -> psutil.Process | None:
        for child in parent.children():
            try:
                if child.name() == "pg_ctl" and "start" in child.cmdline():
                    child.suspend()
                    return child
            except psutil.NoSuchProcess:  # it ended between the listing and the stop
                continue
        return None

    pg_ctl: psutil.Process | None = None

    def caught_or_over() -> bool:
        nonlocal pg_ctl
        pg_ctl = caught()
        return pg_ctl is not None or command.poll() is not None

    wait_until(caught_or_over, "the command to run pg_ctl")
    assert pg_ctl is not None, (command.args, command.returncode)
    return pg_ctl


def said(home: Path, text: str) -> Callable[[], bool]:
    return lambda: text in (home / "err.txt").read_text()


def wait_for_the_signal(command: subprocess.Popen[str], home: Path) -> None:
    """Until the signalled command waits for the start (or, without the fix, has exited past it)."""
    waiting = said(home, WAITING)
    wait_until(lambda: command.poll() is not None or waiting(), "the signal to be handled")


def wait_for_pg_ctl_to_end(pg_ctl: psutil.Process) -> None:
    """Resume it and wait for it to end: then postmaster.pid says whether a server came up."""
    with contextlib.suppress(psutil.NoSuchProcess):
        pg_ctl.resume()
    wait_until(lambda: not alive(pg_ctl.pid), "pg_ctl to end")


@pytest.mark.db
@pytest.mark.process
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_while_the_server_starts_stops_it(
    server: Server, tmp_path: Path, number: int
) -> None:
    command = orchestrator("ask", "hi", home=tmp_path, env={"ORCHESTRATOR_LOG_LEVEL": "INFO"})
    server.users.append(command)  # killed at teardown should the test fail
    pg_ctl = frozen_pg_ctl(command)
    try:
        # To the whole process group, pg_ctl included, as a Ctrl-C on the terminal
        # or `timeout` sends it: a pg_ctl killed by it would leave its server behind.
        os.killpg(command.pid, number)
        wait_for_the_signal(command, tmp_path)  # only then may the start go on
    finally:
        wait_for_pg_ctl_to_end(pg_ctl)

    assert command.wait(timeout=WAIT_SECONDS) == 128 + number, (tmp_path / "err.txt").read_text()
    assert server.postmaster() is None, "the server outlived the command"
    assert command.pid not in server.listed()


@pytest.mark.db
@pytest.mark.process
def test_a_second_ctrl_c_does_not_wait_for_the_server(server: Server, tmp_path: Path) -> None:
    command = orchestrator("ask", "hi", home=tmp_path, env={"ORCHESTRATOR_LOG_LEVEL": "INFO"})
    server.users.append(command)
    pg_ctl = frozen_pg_ctl(command)
    try:
        os.killpg(command.pid, signal.SIGINT)  # Ctrl-C, as the terminal sends it
        wait_for_the_signal(command, tmp_path)
        assert said(tmp_path, WAITING)(), "the first Ctrl-C waits for the start"
        os.killpg(command.pid, signal.SIGINT)
        assert command.wait(timeout=WAIT_SECONDS) == 130
        assert pg_ctl.status() == psutil.STATUS_STOPPED, "it left with the start still stopped"
    finally:
        wait_for_pg_ctl_to_end(pg_ctl)

    # The price, as documented: the server pg_ctl went on to start may be left
    # running, with nobody listed. The next command that uses it stops it.
    with open(tmp_path / "status.err", "w") as err:
        status = subprocess.run(
            [sys.executable, "-m", "orchestrator", "db", "status"], stdout=subprocess.DEVNULL,
            stderr=err, cwd=tmp_path, env=cli_env(tmp_path), timeout=WAIT_SECONDS,
        )
    assert status.returncode == 0, (tmp_path / "status.err").read_text()
    assert server.postmaster() is None


@pytest.mark.db
@pytest.mark.process
def test_a_bad_model_at_startup_is_one_line_and_leaves_no_server(
    server: Server, tmp_path: Path
) -> None:
    # An existing data directory and tool directory: startup has nothing else to say.
    server.data_dir.mkdir()
    (tmp_path / "sub_graphs").mkdir()
    command = orchestrator("ask", "hi", home=tmp_path, env={"ORCHESTRATOR_MODEL": "nosuch:x"})
    server.users.append(command)

    assert command.wait(timeout=WAIT_SECONDS) == 2
    lines = (tmp_path / "err.txt").read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ORCHESTRATOR_MODEL='nosuch:x': ")
    assert server.postmaster() is None
    assert not (server.pgdata / ".handle_pids.json").exists() or command.pid not in server.listed()
