"""The embedded server kept warm between commands, and stopped once idle.

With `ORCHESTRATOR_DB_IDLE_MINUTES` above 0 the last command to leave does not
stop the server: the next one finds it running. One keeper per data directory,
`orchestrator db keep`, started detached by the first command that joins, stops
it (a fast shutdown, as `pg_ctl stop`) once no live command has used it for that
long, and exits; it exits too when the server is gone (`orchestrator db stop`, a
crash), and stops it first when its data directory was deleted or moved. The
time the last command left is the package's pid list's last write (a command
killed is dropped, and so counted, when the keeper first sees it gone).

The keeper also embeds what the commands stored (`after_left`, given by `db keep`):
at its first look after commands left, it embeds the waiting messages with the
model it keeps loaded, so no command starts a `db embed` of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil

from orchestrator.private import PRIVATE_FILE, open_private_log, private_data_dir
from orchestrator.store.embed_later import one_at_a_time, start_detached
from orchestrator.store.logins import replace_file
from orchestrator.store.postmaster import (
    PGDATA,
    PID_LIST,
    Postmaster,
    drop_departed,
    fast_shutdown,
    live_users,
    package_lock,
    postgres_process,
    running_postmaster,
)

KEEPER_LOCK = "db-keeper.lock"
KEEPER_FILE = "db-keeper.json"  # the keeper's pid, start and idle time, for `db status`
KEEPER_LOG = Path("logs") / "db-keeper.log"
# The keeper looks this often at most (and ten times within the idle time): a stop is
# at most this late, and a look is a few file reads.
POLL_SECONDS = 5.0

logger = logging.getLogger(__name__)


def ensure_keeper(data_dir: Path, *, idle_minutes: float, postmaster: int) -> bool:
    """Start the keeper of `data_dir`'s server, detached, unless one runs; whether this started it.

    The keeper's lock is taken here and handed to it (an inherited descriptor holds
    it), so two commands joining at once cannot both start one.
    """
    descriptor = os.open(private_data_dir(data_dir) / KEEPER_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a keeper holds it
        command = [
            sys.executable, "-m", "orchestrator", "db", "keep", str(data_dir),
            "--idle-minutes", f"{idle_minutes:g}", "--lock-fd", str(descriptor),
            "--postmaster", str(postmaster),
        ]  # fmt: skip
        with open_private_log(data_dir / KEEPER_LOG) as log:
            start_detached(command, log=log, pass_fds=(descriptor,))
        return True
    finally:
        os.close(descriptor)  # the keeper's copy holds the lock from here on


def keeper_holds(data_dir: Path) -> bool:
    """Whether a keeper runs for `data_dir` (or is being started): its lock is held."""
    with one_at_a_time(data_dir, KEEPER_LOCK) as free:
        return not free


def keep(
    data_dir: Path,
    *,
    idle_minutes: float,
    lock_fd: int,
    postmaster: int,
    after_left: Callable[[], None] | None = None,
) -> str:
    """Keep the server of `data_dir` until it has been idle `idle_minutes`, then stop it; why it ended.

    `lock_fd` holds the keeper's lock (see `ensure_keeper`): it is kept open to the end.
    `postmaster` is the server's pid as the command that started the keeper saw it:
    the data directory may be gone before the keeper first looks. `after_left` runs
    at the first look after commands left, none using the server: it may use the
    server itself (its own leaving then starts the idle time); a failure is logged.
    """
    pgdata = data_dir / PGDATA
    idle_seconds = idle_minutes * 60
    poll = min(POLL_SECONDS, max(idle_seconds / 10, 0.05))
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # already ours: raises if it is not
    _write_keeper_file(data_dir, idle_minutes)
    seen = postgres_process(postmaster)
    idle_since: float | None = None
    handled: float | None = None  # when the commands `after_left` ran for had left
    while True:
        with package_lock():
            current = running_postmaster(pgdata)
            # Its pid file gone and the server not: its data directory was deleted or moved.
            if current is None and seen is not None and seen.is_running():
                fast_shutdown(seen, pgdata)
                return f"{pgdata} was deleted or moved: stopped its server"
            if current is None:
                return "the server is not running"
            seen = current.process
            try:
                users = drop_departed(pgdata / PID_LIST)
                # Read each time: a command may have come and gone between two looks.
                idle_since = None if users else _last_left(pgdata, otherwise=idle_since or time.time())
            except (FileNotFoundError, NotADirectoryError):
                continue  # being deleted or moved: the next look says so
            if idle_since is not None and time.time() - idle_since >= idle_seconds:
                fast_shutdown(seen, pgdata)
                return f"stopped the server after {idle_minutes:g} idle minutes"
        if after_left is not None and idle_since is not None and idle_since != handled:
            _run_after_left(after_left)
            handled = idle_since = _last_left(pgdata, otherwise=idle_since)
            continue  # look again at once: the server may have changed meanwhile
        time.sleep(poll)  # the keeper's pace, not a wait for another process


def _run_after_left(after_left: Callable[[], None]) -> None:
    try:
        after_left()
    except Exception as error:  # the keeper keeps the server regardless; the next leaving retries
        logger.warning("after the commands left: %s: %s", type(error).__name__, error)


def _last_left(pgdata: Path, *, otherwise: float) -> float:
    """When the last command left: the pid list's last write (`otherwise` if there is none)."""
    try:
        return (pgdata / PID_LIST).stat().st_mtime
    except FileNotFoundError:
        return otherwise


def _write_keeper_file(data_dir: Path, idle_minutes: float) -> None:
    me = psutil.Process()
    record = {"pid": me.pid, "created": me.create_time(), "idle_minutes": idle_minutes}
    with contextlib.suppress(FileNotFoundError):  # the data directory is gone: the loop says so
        replace_file(data_dir / KEEPER_FILE, json.dumps(record))


@dataclass(frozen=True)
class ServerState:
    """What `db status` says of the embedded server: running or not, since when, until when."""

    postmaster: Postmaster | None
    users: int  # the live commands using it
    stops_at: datetime | None  # when the keeper stops it, if no command joins before

    def describe(self) -> str:
        """One line: running since when (its pid), and until when; or not running."""
        if self.postmaster is None:
            return "not running (the next command starts it)"
        since = f"running since {self.postmaster.started:%Y-%m-%d %H:%M:%S} (pid {self.postmaster.process.pid})"
        if self.users == 1:
            return f"{since}, while 1 command uses it"
        if self.users:
            return f"{since}, while {self.users} commands use it"
        if self.stops_at is not None:
            return f"{since}, until {self.stops_at:%Y-%m-%d %H:%M:%S} unless a command uses it"
        return f"{since}, used by no command and kept by none: `orchestrator db stop` stops it"


def server_state(data_dir: Path) -> ServerState:
    """The embedded server's state, read from its files without starting or joining it."""
    pgdata = data_dir / PGDATA
    postmaster = running_postmaster(pgdata)
    if postmaster is None:
        return ServerState(None, 0, None)
    users = [pid for pid in live_users(pgdata / PID_LIST) if pid != os.getpid()]
    minutes = _keeper_minutes(data_dir)
    stops_at = None
    if not users and minutes is not None:
        stops_at = datetime.fromtimestamp(_last_left(pgdata, otherwise=time.time()) + minutes * 60)
    return ServerState(postmaster, len(users), stops_at)


def _keeper_minutes(data_dir: Path) -> float | None:
    """The idle time of the keeper running for `data_dir`; None when none runs."""
    try:
        record = json.loads((data_dir / KEEPER_FILE).read_text())
        keeper = psutil.Process(int(record["pid"]))
        if keeper.create_time() != float(record["created"]):
            return None  # its pid was reused
        return float(record["idle_minutes"])
    except (FileNotFoundError, ValueError, KeyError, TypeError, psutil.NoSuchProcess):
        return None


def stop_server(data_dir: Path) -> tuple[Postmaster, int] | None:
    """Stop the embedded server now (a fast shutdown); it and the commands that were using it, or None."""
    pgdata = data_dir / PGDATA
    with package_lock():
        postmaster = running_postmaster(pgdata)
        if postmaster is None:
            return None
        users = len(drop_departed(pgdata / PID_LIST))
        fast_shutdown(postmaster.process, pgdata)
    return postmaster, users
