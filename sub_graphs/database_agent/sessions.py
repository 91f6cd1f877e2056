"""Engines whose every connection holds read-only and the time limit for its whole session.

A rule set on the transaction (`SET TRANSACTION READ ONLY`, `SET LOCAL statement_timeout`)
ends with it, and SQL that says `COMMIT` ends it. So each connection is set up before any
of the call's SQL runs, and the setup is committed:

- PostgreSQL: `SET SESSION default_transaction_read_only = on` (reads) and `SET SESSION
  statement_timeout`, and each transaction says the same (for poolers in transaction mode);
  psycopg prepares every statement, and the server refuses to prepare more than one
  command, so a second statement never runs.
- MySQL / MariaDB: `SET SESSION TRANSACTION READ ONLY` (reads) and `SET SESSION
  max_execution_time` (MySQL applies it to SELECT statements).
- SQLite: a file is opened read-only (`mode=ro`) for reads, `PRAGMA query_only` on too;
  a progress handler interrupts a connection that outlives the time limit.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path
from time import monotonic

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import NullPool

from orchestrator.errors import ToolError

# SQLite calls the progress handler every this many virtual machine instructions.
SQLITE_PROGRESS_STEPS = 10_000


def guarded_engine(url: URL, *, write: bool, timeout_seconds: float) -> Engine:
    """An engine without a pool whose connections hold read-only (unless `write`) and the limit."""
    backend = url.get_backend_name()
    if backend == "sqlite" and not write:
        url = _read_only_file(url)
    # A prepared statement holds one command: PostgreSQL refuses a second one itself.
    connect_args = {"prepare_threshold": 0} if url.get_driver_name() == "psycopg" else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)
    hold = _hold_sqlite if backend == "sqlite" else _hold_server_session
    event.listen(
        engine,
        "connect",
        partial(hold, backend=backend, write=write, timeout_seconds=timeout_seconds),
    )
    if backend == "postgresql":
        # Each transaction says so too: behind a pooler in transaction mode (PgBouncer) a
        # session's settings may stay with a server connection another client gets next.
        event.listen(
            engine,
            "begin",
            partial(_hold_transaction, write=write, timeout_seconds=timeout_seconds),
        )
    return engine


def _read_only_file(url: URL) -> URL:
    # A plain path only: a `file:` URI or an in-memory database keeps what it says,
    # under `PRAGMA query_only`.
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return url
    uri = Path(database).expanduser().resolve().as_uri()
    return url.set(database=uri, query={**url.query, "mode": "ro", "uri": "true"})


def _session_statements(backend: str, *, write: bool, timeout_seconds: float) -> list[str]:
    milliseconds = max(1, int(timeout_seconds * 1000))
    if backend == "postgresql":
        read_only = [] if write else ["SET SESSION default_transaction_read_only = on"]
        return [*read_only, f"SET SESSION statement_timeout = {milliseconds}"]
    if backend in ("mysql", "mariadb"):
        read_only = [] if write else ["SET SESSION TRANSACTION READ ONLY"]
        return [*read_only, f"SET SESSION max_execution_time = {milliseconds}"]
    return []


def _hold_server_session(
    dbapi_connection: DBAPIConnection,
    _record: object,
    *,
    backend: str,
    write: bool,
    timeout_seconds: float,
) -> None:
    statements = _session_statements(backend, write=write, timeout_seconds=timeout_seconds)
    if not statements:
        return
    cursor = dbapi_connection.cursor()
    try:
        for statement in statements:
            cursor.execute(statement)
    finally:
        cursor.close()
    # Committed, so that no ROLLBACK or COMMIT of the call's SQL undoes it.
    dbapi_connection.commit()


def _hold_transaction(connection: Connection, *, write: bool, timeout_seconds: float) -> None:
    milliseconds = max(1, int(timeout_seconds * 1000))
    read_only = [] if write else ["SET TRANSACTION READ ONLY"]
    # The driver's own cursor: psycopg opens the transaction with the first of these.
    driver = connection.connection.dbapi_connection
    if driver is None:  # SQLAlchemy invalidated it (the server went away)
        raise ToolError("The connection to the database was lost; try again.", recoverable=True)
    cursor = driver.cursor()
    try:
        for statement in [*read_only, f"SET LOCAL statement_timeout = {milliseconds}"]:
            cursor.execute(statement)
    finally:
        cursor.close()


def _hold_sqlite(
    dbapi_connection: sqlite3.Connection,
    _record: object,
    *,
    backend: str,
    write: bool,
    timeout_seconds: float,
) -> None:
    del backend
    dbapi_connection.execute(f"PRAGMA query_only = {'OFF' if write else 'ON'}")
    # One connection serves one call: its time limit runs from the moment it opens.
    deadline = monotonic() + timeout_seconds
    dbapi_connection.set_progress_handler(
        lambda: int(monotonic() > deadline), SQLITE_PROGRESS_STEPS
    )
