"""database_agent's read-only `query` and its time limit hold against SQL that tries to end them.

A real PostgreSQL (the embedded server) holds `accounts`; the login may change it, so only
the agent's guards stand between a smuggled `COMMIT; UPDATE ...; DELETE ...` and the rows:
one statement per call, and read-only and statement_timeout held by the session.
"""

from __future__ import annotations

import importlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psycopg
import pytest
from sqlalchemy import exc

from orchestrator.errors import ToolError
from orchestrator.folders.approvals import ApprovalStore
from orchestrator.folders.discovery import discover_tree, walk
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store.logins import Logins
from orchestrator.testing import call_tools, load_tool_folder
from orchestrator.tools import ToolRequest
from tests.integrations.databases import scratch_database
from tests.integrations.folders import approved_copy
from tests.mcp.test_serve import answer, serve_env, stdio_session
from tests.tool_folders import SHIPPED, copy_shipped

FOLDER = SHIPPED / "database_agent"
ACCOUNTS = """
CREATE TABLE accounts (owner text PRIMARY KEY, balance integer NOT NULL);
INSERT INTO accounts VALUES ('ada', 100), ('bob', 250);
"""
SMUGGLED = (
    "SELECT 1; COMMIT; UPDATE accounts SET balance = 0; DELETE FROM accounts WHERE owner = 'bob'"
)
ROWS = [("ada", 100), ("bob", 250)]


@pytest.fixture(scope="module")
def bank_url(postgres_url: str) -> Iterator[str]:
    """A database of its own holding `accounts`, and a login that may read, change and delete its rows."""
    with scratch_database(postgres_url, schema=ACCOUNTS, tables="accounts", name="bank") as url:
        yield url


@pytest.fixture
def bank(bank_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_AGENT_URL", bank_url)
    return bank_url


def accounts(url: str) -> list[tuple[str, int]]:
    with psycopg.connect(url) as connection:
        return connection.execute("SELECT owner, balance FROM accounts ORDER BY owner").fetchall()


def sql_access() -> ModuleType:
    """The agent's sql_access module, as the loader imported it."""
    package = type(load_tool_folder(FOLDER)).__module__.rpartition(".")[0]
    return importlib.import_module(f"{package}.sql_access")


async def call(action: str, **parameters: object):
    tool = load_tool_folder(FOLDER)
    return await tool.execute(
        ToolRequest(request_id="r1", action=action, parameters=parameters, user_id="ada")
    )


async def test_smuggled_statements_are_refused_and_no_row_changes(
    bank: str, monkeypatch: pytest.MonkeyPatch
):
    with pytest.raises(ToolError, match="runs one statement per call; this SQL holds 4") as query:
        await call("query", sql=SMUGGLED)
    with pytest.raises(ToolError, match="holds 3 \\(SELECT, COMMIT, SELECT\\)") as sleep:
        await call("query", sql="SELECT 1; COMMIT; SELECT pg_sleep(30)")
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "true")
    with pytest.raises(ToolError) as write:
        await call("write", sql="UPDATE accounts SET balance = 1; DELETE FROM accounts")

    assert query.value.code == sleep.value.code == write.value.code == "multiple_statements"
    assert not query.value.recoverable
    assert accounts(bank) == ROWS


async def test_semicolons_inside_strings_comments_and_dollar_quotes_are_one_statement(bank: str):
    quoted = await call(
        "query",
        sql="SELECT $$a; COMMIT$$ AS dollars, $t$;$t$ AS tagged, 'b;c' AS text, "
        '1 AS "d;e" /* ; DELETE */ ; -- ; DELETE FROM accounts\n;',
    )

    assert quoted.data["rows"] == [{"dollars": "a; COMMIT", "tagged": ";", "text": "b;c", "d;e": 1}]
    with pytest.raises(ToolError) as empty:
        await call("query", sql="-- nothing;\n;")
    assert empty.value.code == "invalid_arguments"


async def test_the_time_limit_holds(bank: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DATABASE_AGENT_STATEMENT_TIMEOUT_SECONDS", "0.2")

    with pytest.raises(ToolError, match="stopped the statement at its time limit") as stopped:
        await call("query", sql="SELECT pg_sleep(30)")
    with pytest.raises(ToolError, match="stopped the statement at its time limit") as lifted:
        # One statement that lifts the limit first: the limit armed as it began still holds.
        await call("query", sql="SELECT set_config('statement_timeout', '0', false), pg_sleep(30)")
    with pytest.raises(ToolError) as written:  # nor does a transaction made read-write
        await call("query", sql=(
            "SELECT set_config('transaction_read_only', 'off', true), "
            "(SELECT count(*) FROM accounts)"
        ))
    shown = await call("query", sql="SHOW statement_timeout")
    explained = await call("query", sql="EXPLAIN SELECT * FROM accounts")

    assert stopped.value.code == "statement_timeout" and not stopped.value.recoverable
    assert lifted.value.code == "statement_timeout"
    assert "read-write" in str(written.value), str(written.value)
    assert shown.data["rows"] == [{"statement_timeout": "200ms"}]
    assert explained.data["row_count"] >= 1, "SHOW and EXPLAIN run prepared too"


def test_read_only_and_the_limit_are_the_sessions_and_a_commit_does_not_end_them(bank: str):
    """The second guard, should SQL ever get past the first: the session's own rules."""
    access = sql_access()
    settings = access.DatabaseSettings(url=bank, statement_timeout_seconds=7)
    engine = access.engine_for(settings, write=False)

    with engine.connect() as connection:
        connection.exec_driver_sql("COMMIT")
        timeout = connection.exec_driver_sql("SHOW statement_timeout").scalar()
        read_only = connection.exec_driver_sql("SHOW transaction_read_only").scalar()
        with pytest.raises(exc.DBAPIError) as refused:
            connection.exec_driver_sql("UPDATE accounts SET balance = 0")
        connection.rollback()
        with pytest.raises(exc.DBAPIError) as two:
            connection.exec_driver_sql("SELECT 1; DELETE FROM accounts")

    assert (timeout, read_only) == ("7s", "on")
    assert refused.value.orig.sqlstate == "25006"  # type: ignore[union-attr]
    assert "cannot insert multiple commands into a prepared statement" in str(two.value.orig)
    assert accounts(bank) == ROWS


async def test_sqlite_reads_are_one_statement_on_a_read_only_file_within_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    access = sql_access()
    path = tmp_path / "bank.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(ACCOUNTS)
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{path}")
    monkeypatch.setenv("DATABASE_AGENT_STATEMENT_TIMEOUT_SECONDS", "0.05")

    with pytest.raises(ToolError) as smuggled:
        await call("query", sql="SELECT 1; COMMIT; DELETE FROM accounts")
    with pytest.raises(ToolError, match="stopped the statement at its time limit") as endless:
        await call(
            "query",
            sql="WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 100000000) SELECT count(*) FROM n",
        )
    engine = access.engine_for(access.DatabaseSettings(url=f"sqlite:///{path}"), write=False)
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA query_only = OFF")
        with pytest.raises(exc.OperationalError, match="attempt to write a readonly database"):
            connection.exec_driver_sql("DELETE FROM accounts")

    assert smuggled.value.code == "multiple_statements"
    assert endless.value.code == "statement_timeout"
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM accounts").fetchone() == (2,)


def test_orchestrator_run_refuses_the_smuggled_statements(cli, bank: str, tmp_path: Path):
    approved_copy(cli, tmp_path, "database_agent")

    refused = cli(
        "run", "database_agent", "query", "--json", json.dumps({"sql": SMUGGLED}), cwd=tmp_path
    )

    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "multiple_statements"
    assert accounts(bank) == ROWS


@pytest.mark.process  # copy_shipped asks git which files are shipped
async def test_a_models_smuggled_statements_are_refused_without_asking_anyone(
    scripted, bank: str, tmp_path: Path
):
    settings = load_settings(sub_graphs_dir=copy_shipped(tmp_path), data_dir=tmp_path / "data")
    model = scripted(
        call_tools(("database_agent_query", {"sql": SMUGGLED})),
        "It was refused.",
    )
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True)

    result = await runtime.session(user_id="ada").run("Zero every balance.")

    assert result.answer == "It was refused."
    told = json.loads(model.received[1][-1].text)
    assert told["error_code"] == "multiple_statements"
    assert accounts(bank) == ROWS


@pytest.mark.process
async def test_through_mcp_serve_the_smuggled_statements_are_refused(
    bank: str, tmp_path: Path, database_logins: Logins
):
    settings = load_settings(sub_graphs_dir=copy_shipped(tmp_path), data_dir=tmp_path / "data")
    store = ApprovalStore.of(settings)
    [folder] = [
        node.folder
        for node in walk(discover_tree(settings.sub_graphs_dir).nodes)
        if node.folder.name == "database_agent"
    ]
    store.decide(folder, approved=True)

    env = serve_env(tmp_path, database_logins, DATABASE_AGENT_URL=bank)
    async with stdio_session(tmp_path, env) as session:
        refused = await session.call_tool("database_agent_query", {"sql": SMUGGLED})
        read = await session.call_tool(
            "database_agent_query", {"sql": "SELECT balance FROM accounts WHERE owner = 'bob'"}
        )

    assert refused.isError and answer(refused)["error_code"] == "multiple_statements"
    assert not read.isError
    assert read.structuredContent["data"]["rows"] == [{"balance": 250}]  # type: ignore[index]
    assert accounts(bank) == ROWS
