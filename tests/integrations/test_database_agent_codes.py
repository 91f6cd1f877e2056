"""database_agent's documented error codes, each against the real database that says it.

The embedded PostgreSQL holds a database of its own and a read-only role (SELECT on
`customers` only): what that role may not do is `refused`, what is not there `not_found`;
SQLite says the same for its own. Each failure is asserted with its code and whether
another try may help (`recoverable`, the envelope's `retryable`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import ToolRequest
from tests.integrations.databases import scratch_database
from tests.integrations.folders import approved_copy
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "database_agent"
LEDGER = """
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, balance numeric(30, 10));
CREATE TABLE secrets (id integer PRIMARY KEY, word text);
CREATE SEQUENCE tickets;
GRANT USAGE ON SEQUENCE tickets TO PUBLIC;
INSERT INTO customers VALUES (1, 'Ada', 0.1), (2, 'Bob', 12345678901234567890.0123456789);
INSERT INTO secrets VALUES (1, 'swordfish');
-- Runs with its owner's rights, who may delete: only read-only stops it in a query.
CREATE FUNCTION forget() RETURNS integer LANGUAGE sql SECURITY DEFINER
    AS 'DELETE FROM customers RETURNING 1';
"""


@pytest.fixture(scope="module")
def reader_url(postgres_url: str) -> Iterator[str]:
    """The URL of a role that may only read `customers` (not `secrets`, nor change anything)."""
    with scratch_database(
        postgres_url, schema=LEDGER, tables="customers", name="ledger", rights="SELECT"
    ) as url:
        yield url


@pytest.fixture
def reader(reader_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_AGENT_URL", reader_url)
    return reader_url


@pytest.fixture
def sqlite_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL);"
            "INSERT INTO customers VALUES (1, 'Ada'), (2, 'Bob');"
        )
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{path}")
    return path


async def call(action: str, **parameters: object):
    tool = load_tool_folder(FOLDER)
    return await tool.execute(
        ToolRequest(request_id="r1", action=action, parameters=parameters, user_id="ada")
    )


async def failure(action: str, **parameters: object) -> ToolError:
    with pytest.raises(ToolError) as failed:
        await call(action, **parameters)
    return failed.value


def customers(url: str) -> int:
    with psycopg.connect(url) as connection:
        [(count,)] = connection.execute("SELECT count(*) FROM customers").fetchall()
    return count


async def test_what_the_login_may_not_do_is_refused(reader: str, monkeypatch):
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "true")

    unreadable = await failure("query", sql="SELECT word FROM secrets")
    unwritable = await failure("write", sql="UPDATE customers SET name = 'Zed'")

    for refused in (unreadable, unwritable):
        assert (refused.code, refused.recoverable) == ("refused", False), str(refused)
        assert "permission denied" in str(refused)
    assert customers(reader) == 2


async def test_a_missing_table_schema_or_database_is_not_found(reader: str, monkeypatch):
    table = await failure("query", sql="SELECT * FROM invoices")
    schema = await failure("query", sql="SELECT * FROM archive.customers")
    monkeypatch.setenv(
        "DATABASE_AGENT_URL",
        make_url(reader).set(database="no_such_db").render_as_string(hide_password=False),
    )
    database = await failure("query", sql="SELECT 1")

    for missing in (table, schema, database):
        assert (missing.code, missing.recoverable) == ("not_found", False), str(missing)
    assert 'relation "invoices" does not exist' in str(table)
    assert 'database "no_such_db" does not exist' in str(database)


async def test_a_missing_sqlite_table_is_not_found(sqlite_ledger: Path):
    missing = await failure("query", sql="SELECT * FROM invoices")

    assert (missing.code, missing.recoverable) == ("not_found", False)
    assert "no such table: invoices" in str(missing)


@pytest.mark.parametrize("action", ["query", "write"])
async def test_a_misspelt_statement_is_a_syntax_error_not_a_write(
    action: str, reader: str, monkeypatch
):
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "true")

    misspelt = await failure(action, sql="SELEC oops")
    broken = await failure(
        action, sql="SELECT FROM WHERE customers" if action == "query" else "UPDATE SET customers"
    )

    assert (misspelt.code, misspelt.retry_strategy) == ("invalid_arguments", "fix_arguments")
    assert "syntax error: 'selec' does not start an SQL statement" in str(misspelt)
    assert (broken.code, broken.retry_strategy) == ("invalid_arguments", "fix_arguments")
    assert "syntax error" in str(broken)


async def test_a_misspelt_sqlite_statement_is_a_syntax_error(sqlite_ledger: Path):
    misspelt = await failure("query", sql="  /* hi */ SELEC oops")

    assert misspelt.code == "invalid_arguments" and "syntax error" in str(misspelt)


async def test_a_statement_past_its_time_limit_is_a_timeout(
    reader: str, sqlite_ledger: Path, monkeypatch
):
    monkeypatch.setenv("DATABASE_AGENT_STATEMENT_TIMEOUT_SECONDS", "0.1")
    monkeypatch.setenv("DATABASE_AGENT_URL", reader)
    postgres = await failure("query", sql="SELECT pg_sleep(30)")
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{sqlite_ledger}")
    sqlite = await failure(
        "query",
        sql="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        "SELECT count(*) FROM n",
    )

    for stopped in (postgres, sqlite):
        assert (stopped.code, stopped.recoverable) == ("statement_timeout", False), str(stopped)
        assert "narrow the query" in str(stopped)


async def test_a_locked_sqlite_database_is_busy_and_worth_a_retry(sqlite_ledger: Path, monkeypatch):
    # timeout=0: SQLite's busy wait gives up at once rather than after its 5 seconds.
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{sqlite_ledger}?timeout=0")
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "true")
    holder = sqlite3.connect(sqlite_ledger, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        read = await failure("query", sql="SELECT count(*) FROM customers")
        written = await failure("write", sql="DELETE FROM customers")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    after = await call("query", sql="SELECT count(*) AS n FROM customers")

    for busy in (read, written):
        assert (busy.code, busy.recoverable) == ("database_busy", True), str(busy)
        assert "database is locked" in str(busy)
    assert after.data["rows"] == [{"n": 2}], "the same call works once the lock is gone"


async def test_numeric_values_come_back_exact_as_text(reader: str):
    read = await call(
        "query",
        sql="SELECT name, balance, 0.1::numeric + 0.2::numeric AS sum FROM customers ORDER BY id",
    )

    assert read.data["rows"] == [
        {"name": "Ada", "balance": "0.1000000000", "sum": "0.3"},
        {"name": "Bob", "balance": "12345678901234567890.0123456789", "sum": "0.3"},
    ]


async def test_a_query_cannot_write_through_a_function_or_a_sequence(reader: str):
    function = await failure("query", sql="SELECT forget()")
    sequence = await failure("query", sql="SELECT nextval('tickets')")

    for refused in (function, sequence):
        assert (refused.code, refused.recoverable) == ("read_only", False), str(refused)
        assert "read-only transaction" in str(refused)
    assert customers(reader) == 2


async def test_a_sqlite_uri_is_read_only_for_a_query_too(sqlite_ledger: Path, monkeypatch):
    # A `file:` URI keeps the mode it says (here: read-write); PRAGMA query_only still holds.
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///file:{sqlite_ledger}?mode=rw&uri=true")

    refused = await failure("query", sql="WITH x AS (SELECT 1) DELETE FROM customers")

    assert (refused.code, refused.recoverable) == ("read_only", False)
    with sqlite3.connect(sqlite_ledger) as connection:
        assert connection.execute("SELECT count(*) FROM customers").fetchone() == (2,)


def test_a_write_with_writes_off_is_refused_before_anyone_is_asked(
    cli, reader: str, tmp_path: Path
):
    approved_copy(cli, tmp_path, "database_agent")

    refused = cli(
        "run",
        "database_agent",
        "write",
        "--json",
        json.dumps({"sql": "DELETE FROM customers"}),
        cwd=tmp_path,
        stdin="y\n",
    )

    assert refused.returncode == 1
    envelope = json.loads(refused.stdout)
    assert envelope["error"]["code"] == "writes_disabled"
    assert envelope["error"]["details"] == {"recoverable": False}
    assert "database_agent_write" not in refused.stderr, "no question was asked"
