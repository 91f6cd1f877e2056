"""The warm embedded server: left running for the next command, stopped once idle or by `db stop`.

Real `orchestrator` processes (and plain joiners) on a data directory of the test's
own; whatever a test leaves running is stopped at its end. The keeper polls (that is
the product); the tests wait on processes ending, never on a sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from orchestrator.store.postmaster import PGDATA, running_postmaster
from orchestrator.store.warm_server import KEEPER_FILE
from tests.helpers import cli_env, run_cli
from tests.store.test_embedded_server import WAIT_SECONDS, alive, wait_until

# A user of the server that is no `orchestrator` command: joins with the idle time
# given, writes a marker, and leaves when the test closes its stdin.
JOINER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from orchestrator.store.embedded import embedded_database_url

    data_dir, marker, minutes = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    embedded_database_url(data_dir, idle_minutes=minutes)
    marker.write_text("joined")
    sys.stdin.read()
    """
)
OTHER_USER = "orchestrator-test"


@dataclass
class Home:
    """A home directory (its data in `home/data`) and the processes the test started there."""

    path: Path
    user: str | None = None  # another OS user to run the commands as
    python: str = sys.executable
    embeddings: str = "none"
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.path / "data"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / PGDATA

    def env(self, minutes: float) -> dict[str, str]:
        return {
            **cli_env(self.path),
            "ORCHESTRATOR_EMBEDDINGS": self.embeddings,
            "ORCHESTRATOR_DB_IDLE_MINUTES": f"{minutes:g}",
            "PYTHONDONTWRITEBYTECODE": "1",
            **({} if self.python == sys.executable else {"PYTHONPATH": os.pathsep.join(IMPORTABLE)}),
        }

    def run(self, *args: str, minutes: float = 10) -> subprocess.CompletedProcess[str]:
        """`orchestrator ARGS` to its end, with the idle time `minutes`."""
        done = subprocess.run(
            [self.python, "-m", "orchestrator", *args],
            capture_output=True, text=True, cwd=self.path, env=self.env(minutes),
            timeout=WAIT_SECONDS, user=self.user, start_new_session=True,
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def join(self, *, minutes: float) -> subprocess.Popen[str]:
        """A process that uses the server until its stdin is closed."""
        marker = self.path / f"joined-{len(self.started)}"
        joiner = subprocess.Popen(
            [self.python, "-c", JOINER, str(self.data_dir), str(marker), f"{minutes:g}"],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.path,
            env=self.env(minutes), user=self.user,
        )
        self.started.append(joiner)
        wait_until(lambda: marker.exists() or joiner.poll() is not None, "a process to join")
        assert marker.exists(), joiner.communicate()[1]
        return joiner

    def postmaster(self) -> psutil.Process | None:
        running = running_postmaster(self.pgdata)
        return None if running is None else running.process

    def keeper(self) -> psutil.Process:
        """The keeper of this data directory (it is started as the first command joins), once it
        keeps it: its file says so, which `db status` reads."""
        found: list[psutil.Process] = []

        def there() -> bool:
            found[:] = [p for p in psutil.process_iter(["cmdline"]) if _keeps(p, self.data_dir)]
            return bool(found) and self._keeper_says(found[0].pid)

        wait_until(there, "the keeper")
        assert len(found) == 1, [p.info["cmdline"] for p in found]
        return found[0]

    def _keeper_says(self, pid: int) -> bool:
        try:
            return json.loads((self.data_dir / KEEPER_FILE).read_text()).get("pid") == pid
        except (FileNotFoundError, ValueError):  # not written yet, or being replaced
            return False

    def cleanly_shut_down(self) -> bool:
        """Whether the server's log ends with a clean shutdown (a fast one, never a kill)."""
        return (self.pgdata / "log").read_text().splitlines()[-1].endswith("database system is shut down")

    def tear_down(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.communicate()
        for process in psutil.process_iter(["cmdline"]):
            if _keeps(process, self.data_dir):
                process.kill()
        postmaster = self.postmaster()
        if postmaster is not None:
            postmaster.send_signal(signal.SIGINT)
            postmaster.wait(WAIT_SECONDS)


def _keeps(process: psutil.Process, data_dir: Path) -> bool:
    command: list[str] = process.info["cmdline"] or []
    return command[3:6] == ["db", "keep", str(data_dir.resolve())]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    home = Home(tmp_path / "home")
    home.path.mkdir()
    try:
        yield home
    finally:
        home.tear_down()


def wait_ended(process: psutil.Process) -> None:
    """Wait for `process` to end (an upper bound only: the keeper ends past the idle time)."""
    process.wait(WAIT_SECONDS)


pytestmark = [pytest.mark.db, pytest.mark.process]


def test_the_first_command_starts_it_the_next_uses_it_and_db_stop_stops_it(home: Home) -> None:
    home.run("db", "upgrade")
    postmaster = home.postmaster()
    assert postmaster is not None, "left running for the next command"
    keeper = home.keeper()

    status = home.run("db", "status").stdout.splitlines()[0]
    assert re.fullmatch(
        rf"embedded PostgreSQL: running since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \(pid {postmaster.pid}\), "
        r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d unless a command uses it",
        status,
    ), status
    home.run("db", "upgrade")
    assert home.postmaster() == postmaster, "the second command used the same server"

    stopped = home.run("db", "stop")
    assert stopped.stdout.strip() == f"stopped the embedded PostgreSQL (pid {postmaster.pid})"
    assert not alive(postmaster.pid)
    assert home.cleanly_shut_down()
    wait_ended(keeper)  # nothing left to keep
    assert home.run("db", "status").stdout.strip() == (
        "embedded PostgreSQL: not running (the next command starts it)"
    )
    assert home.run("db", "stop").stdout.strip() == "the embedded PostgreSQL is not running"


def test_it_stops_by_itself_once_idle_for_the_idle_time(home: Home) -> None:
    home.run("db", "upgrade", minutes=0.05)
    postmaster = home.postmaster()
    assert postmaster is not None
    wait_ended(home.keeper())
    assert not alive(postmaster.pid)
    assert home.cleanly_shut_down()
    assert "stopped the server after 0.05 idle minutes" in (home.data_dir / "logs" / "db-keeper.log").read_text()


def test_zero_idle_minutes_stops_it_as_the_last_command_exits(home: Home) -> None:
    home.run("db", "upgrade", minutes=0)
    assert home.postmaster() is None
    assert not (home.data_dir / "logs" / "db-keeper.log").exists(), "no keeper"


def test_the_keeper_embeds_what_the_commands_stored_and_no_db_embed_starts(home: Home) -> None:
    home.embeddings = "local"
    home.run("ask", "hello there")
    home.run("ask", "what did I say?")
    keeper_log = home.data_dir / "logs" / "db-keeper.log"

    def all_embedded(stored: int) -> bool:
        status = home.run("db", "status").stdout
        return f"messages to embed (yours and the assistant's): {stored} " in status and (
            "waiting for their vectors: 0\n" in status
        )

    wait_until(lambda: all_embedded(4), "the keeper to embed both asks' messages")
    assert "embedded " in keeper_log.read_text(), "the keeper embedded them"
    home.run("ask", "and now?")  # the model it keeps loaded embeds the next ones too
    wait_until(lambda: all_embedded(6), "the keeper to embed the third ask's messages")
    assert not (home.data_dir / "logs" / "embedding.log").exists(), "no `db embed` was started"
    assert home.keeper().is_running(), "embedding left the keeper keeping the server"


def test_two_at_once_share_it_and_it_outlives_both(home: Home) -> None:
    first = home.join(minutes=10)
    second = home.join(minutes=10)
    postmaster = home.postmaster()
    assert postmaster is not None
    status = home.run("db", "status").stdout.splitlines()[0]
    assert status.endswith(f"(pid {postmaster.pid}), while 2 commands use it"), status

    first.communicate("")
    second.communicate("")
    assert home.postmaster() == postmaster
    status = home.run("db", "status").stdout.splitlines()[0]
    assert status.endswith("unless a command uses it"), status


def test_a_killed_client_is_dropped_and_the_server_still_stops_once_idle(home: Home) -> None:
    killed = home.join(minutes=0.05)
    postmaster = home.postmaster()
    assert postmaster is not None
    killed.kill()  # SIGKILL: no exit hook, it stays listed
    killed.communicate()

    wait_ended(home.keeper())
    assert not alive(postmaster.pid)
    assert home.cleanly_shut_down()


def test_after_a_kill_9_of_the_server_the_next_command_starts_it_again(home: Home) -> None:
    home.run("db", "upgrade")
    postmaster = home.postmaster()
    assert postmaster is not None
    keeper = home.keeper()
    backends = postmaster.children()
    postmaster.kill()
    psutil.wait_procs([postmaster, *backends], timeout=WAIT_SECONDS)
    wait_ended(keeper)  # its server is gone

    home.run("db", "upgrade")
    restarted = home.postmaster()
    assert restarted is not None and restarted.pid != postmaster.pid
    home.keeper()  # a new one


def test_a_pid_file_whose_pid_was_taken_since_is_cleared_in_one_line(home: Home) -> None:
    home.run("db", "upgrade", minutes=0)
    stranger = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        # What a kill -9 and a reboot leave: the file, its pid now a live stranger's.
        lines = ["", str(home.pgdata), "0", "5432", str(home.pgdata), "", "0 0", "ready"]
        lines[0] = str(stranger.pid)
        (home.pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")

        done = home.run("db", "upgrade", minutes=0)
    finally:
        stranger.communicate(b"")
    said = [line for line in done.stderr.splitlines() if "crashed" in line]
    assert len(said) == 1 and f"its pid {stranger.pid} is another process's now" in said[0], done.stderr


@pytest.mark.parametrize("how", ["moved", "deleted"])
def test_a_data_directory_moved_or_deleted_under_a_running_server(home: Home, how: str) -> None:
    home.run("db", "upgrade")
    postmaster = home.postmaster()
    assert postmaster is not None
    keeper = home.keeper()
    elsewhere = Home(home.path.parent / "elsewhere")
    elsewhere.path.mkdir()
    try:
        if how == "deleted":
            # Out of the way in one step, then deleted: a running server may still write into it,
            # which makes a plain rmtree race it ("Directory not empty").
            trash = home.path / "trash"
            home.data_dir.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
            wait_ended(keeper)  # it stopped the server first
            assert not alive(postmaster.pid)
            shutil.rmtree(trash, ignore_errors=True)  # what it wrote meanwhile
            assert not trash.exists()
            return
        home.data_dir.rename(elsewhere.data_dir)

        done = elsewhere.run("db", "upgrade")
        restarted = elsewhere.postmaster()
        assert restarted is not None and restarted.pid != postmaster.pid
        assert not alive(postmaster.pid)
        assert running_postmaster(elsewhere.pgdata).data_dir == elsewhere.pgdata  # type: ignore[union-attr]
        # Whichever saw it first: the command (one line), or the old keeper (it stopped it).
        moved = [line for line in done.stderr.splitlines() if "has moved to" in line]
        keeper_log = (elsewhere.data_dir / "logs" / "db-keeper.log").read_text()
        assert len(moved) == 1 or "was deleted or moved: stopped its server" in keeper_log, done.stderr
    finally:
        elsewhere.tear_down()


@pytest.mark.parametrize(("version", "remedy"), [("16", "set PGSERVER_POSTGRES_VERSION=16"), ("15", "pg_dumpall")])
def test_data_of_another_postgresql_version_is_one_line(tmp_path: Path, version: str, remedy: str) -> None:
    pgdata = tmp_path / "data" / PGDATA
    pgdata.mkdir(parents=True)
    (pgdata / "PG_VERSION").write_text(f"{version}\n")

    done = run_cli("db", "upgrade", cwd=tmp_path)

    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert f"was made by PostgreSQL {version}, and this installation runs PostgreSQL 18: " in lines[0]
    assert remedy in lines[0]


def test_a_socket_lock_another_server_holds_is_one_line(home: Home) -> None:
    home.run("db", "upgrade", minutes=0)
    server_user = pwd.getpwuid(home.pgdata.stat().st_uid).pw_name
    # A live process the server's user may signal, as another postmaster would be.
    holder = subprocess.Popen(
        ["sleep", str(WAIT_SECONDS)], user=server_user if os.geteuid() == 0 else None
    )
    try:
        (home.pgdata / ".s.PGSQL.5432.lock").write_text(f"{holder.pid}\n{home.pgdata}\n0\n5432\n")
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "db", "upgrade"], capture_output=True, text=True,
            cwd=home.path, env=home.env(0), timeout=WAIT_SECONDS,
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert 'lock file "' in lines[0] and ".s.PGSQL.5432.lock\" already exists" in lines[0], lines


@pytest.fixture
def other_user() -> Iterator[Home]:
    """A home of another OS user's (made with useradd if need be), or this user's if not root."""
    made = False
    if os.geteuid() != 0:
        user = None  # this user is already not root
    else:
        user = OTHER_USER
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", user], check=True, capture_output=True)
            made = True
    path = Path(tempfile.mkdtemp(prefix="orchestrator-user-"))  # outside root's private temp
    python = sys.executable
    if user is not None:
        shutil.chown(path, user, user)
        python = _python_for(user)
    home = Home(path, user=user, python=python)
    try:
        yield home
    finally:
        home.tear_down()
        shutil.rmtree(path, ignore_errors=True)
        if made:
            subprocess.run(["userdel", OTHER_USER], check=False, capture_output=True)


def _python_for(user: str) -> str:
    """An interpreter `user` may run: this one, or the system's of the same version (this one may
    be in a folder of root's, as pyenv's is), the tested code and the packages on its path."""
    entry = pwd.getpwnam(user)
    reachable = subprocess.run(
        ["test", "-x", sys.executable], user=entry.pw_uid, group=entry.pw_gid, check=False
    )
    if reachable.returncode == 0:
        return sys.executable
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        pytest.skip(f"{user} may not run {sys.executable}, and there is no {system}")
    return str(system)


# The tested code and this environment's packages, for the system's interpreter.
IMPORTABLE = [str(Path(__file__).resolve().parents[2]), *site.getsitepackages()]


def test_as_another_user_it_is_kept_warm_and_stops_cleanly_once_idle(other_user: Home) -> None:
    other_user.run("db", "upgrade", minutes=0.05)
    postmaster = other_user.postmaster()
    assert postmaster is not None
    if other_user.user is not None:
        assert postmaster.username() == other_user.user
    keeper = other_user.keeper()
    assert keeper.username() == (other_user.user or pwd.getpwuid(os.geteuid()).pw_name)
    wait_ended(keeper)
    assert not alive(postmaster.pid)
    assert other_user.cleanly_shut_down()


def test_db_stop_stops_it_while_commands_use_it(home: Home) -> None:
    user = home.join(minutes=10)
    postmaster = home.postmaster()
    assert postmaster is not None
    stopped = home.run("db", "stop")
    assert stopped.stdout.strip() == f"stopped the embedded PostgreSQL (pid {postmaster.pid}); 1 running command lost it"
    assert not alive(postmaster.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        user.communicate("", timeout=WAIT_SECONDS)
