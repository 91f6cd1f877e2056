"""What a process asks of PostgreSQL: statements (client side) and write transactions (server side).

Used by `bench_turn.py`. Statements are counted inside psycopg, below
SQLAlchemy and LangGraph's checkpointer alike, so both sides of a comparison
are counted the same way: every statement sent (each parameter set of an
`executemany` is one, a prepared statement's execution is one; SQLAlchemy's
pool pre-ping too), and every command psycopg sends by itself (BEGIN, COMMIT,
ROLLBACK, SAVEPOINT, RELEASE). Preparing a statement is not counted: it is
part of its first execution. Each statement is filed under the database its
connection is on, so two systems on two databases of one server are told apart.

Write transactions are counted by the server: every transaction that changes
(or locks) a row gets a transaction id, and only those flush the WAL when they
commit. The next id to be assigned (`pg_snapshot_xmax(pg_current_snapshot())`,
which assigns none) is read before and after; the difference is the number of
transactions that wrote, cluster-wide, so only one system may run meanwhile.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

import psycopg
from psycopg._connection_base import BaseConnection
from psycopg._cursor_base import BaseCursor
from psycopg.sql import Composable

P = ParamSpec("P")
R = TypeVar("R")

PRE_PING = "; (SQLAlchemy's pool pre-ping)"
# Kinds that carry no work of their own: transaction control and pings.
OVERHEAD = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", PRE_PING})
NEXT_XID = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
TABLE_AFTER = re.compile(
    r"\b(from|into|update|join)\s+(?!\()(?:only\s+)?([\w.\"]+)", re.IGNORECASE
)
FUNCTION = re.compile(r"([\w.]+)\s*\(")


class StatementLog:
    """The statements sent to each database while installed (see `counting`)."""

    def __init__(self) -> None:
        self.sent: dict[str, list[str]] = {}

    def record(self, database: str, sql: str) -> None:
        self.sent.setdefault(database, []).append(sql)

    def count(self, database: str) -> int:
        return len(self.sent.get(database, []))


@contextmanager
def counting() -> Iterator[StatementLog]:
    """Count the statements psycopg sends while the block runs (the patch is removed after)."""
    log = StatementLog()
    patched = {
        (BaseCursor, "_execute_send"): lambda self, query, *a, **k: _seen(
            log, self._conn, query.query
        ),
        (BaseCursor, "_send_query_prepared"): lambda self, name, query, *a, **k: _seen(
            log, self._conn, query.query
        ),
        (BaseConnection, "_exec_command"): lambda self, command, *a, **k: _seen(log, self, command),
    }
    originals = {}
    for (owner, name), before in patched.items():
        original = getattr(owner, name)
        originals[owner, name] = original
        setattr(owner, name, _after(before, original))
    try:
        yield log
    finally:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)


def _after(before: Callable[..., None], original: Callable[P, R]) -> Callable[P, R]:
    # A plain function returning what the original returns: for the generator
    # methods that is the generator itself, which their callers `yield from`.
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        before(*args, **kwargs)
        return original(*args, **kwargs)

    return wrapper


def _seen(log: StatementLog, connection: BaseConnection, sql: object) -> None:
    if isinstance(sql, bytes):
        statement = sql.decode(errors="replace")
    elif isinstance(sql, Composable):  # as for SAVEPOINT names
        statement = sql.as_string(None)
    else:
        statement = str(sql)
    log.record((connection.pgconn.db or b"").decode(), statement)


def kind(sql: str) -> str:
    """`INSERT checkpoint_writes`, `SELECT messages`, `SELECT pg_try_advisory_lock`, `COMMIT`..."""
    words = sql.split(None, 1)
    if not words:
        return "(empty)"
    keyword = words[0].upper()
    if keyword in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"):
        return keyword
    if keyword == ";":
        return PRE_PING
    tables = [m for m in TABLE_AFTER.finditer(sql) if not _function_in_from(sql, m)]
    if tables:
        # the statement's own table, not one a subquery in its select list reads
        table = min(tables, key=lambda m: (_depth(sql, m.start()), m.start()))
        return f"{keyword} {table.group(2).strip(chr(34))}"
    functions = [m.group(1) for m in FUNCTION.finditer(sql) if _depth(sql, m.start()) == 0]
    if functions:
        return f"{keyword} {', '.join(f'{name}()' for name in functions)}"
    return " ".join(sql.split())[:40]


def _function_in_from(sql: str, match: re.Match[str]) -> bool:
    """`FROM jsonb_each_text(...)`: a function, not a table (`INTO t (a, b)` is a table)."""
    in_from = match.group(1).lower() in ("from", "join")
    return in_from and sql[match.end() :].lstrip().startswith("(")


def _depth(sql: str, position: int) -> int:
    before = sql[:position]
    return before.count("(") - before.count(")")


def next_transaction_id(admin_url: str) -> int:
    """The id the server's next writing transaction will get (reading it assigns none)."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        row = connection.execute(NEXT_XID).fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def autovacuum_paused(admin_url: str) -> Iterator[None]:
    """No autovacuum (autoanalyze writes statistics, in transactions of its own) in the block."""
    _set_autovacuum(admin_url, "off")
    try:
        yield
    finally:
        _set_autovacuum(admin_url, None)


def _set_autovacuum(admin_url: str, value: str | None) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        if value is None:
            connection.execute("ALTER SYSTEM RESET autovacuum")
        else:
            connection.execute(f"ALTER SYSTEM SET autovacuum = {value}")
        connection.execute("SELECT pg_reload_conf()")
