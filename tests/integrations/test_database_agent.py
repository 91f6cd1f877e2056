"""database_agent against real databases: the embedded PostgreSQL (a database and login of its own) and SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import ToolRequest
from tests.integrations.databases import scratch_database
from tests.integrations.folders import approved_copy, free_port
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "database_agent"
SHOP = """
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, city text);
CREATE TABLE orders (
    id integer PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES customers (id),
    total numeric(10, 2) NOT NULL,
    placed date NOT NULL
);
INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Bob', 'Paris'), (3, 'Cy', 'Paris');
INSERT INTO orders VALUES (10, 1, 120.50, '2026-11-01'), (11, 2, 80, '2026-11-02'), (12, 2, 15.25, '2026-11-03');
"""


@pytest.fixture(scope="module")
def shop_url(postgres_url: str) -> Iterator[str]:
    """A database of its own on the embedded server, its tables readable and writable by a login of its own."""
    with scratch_database(postgres_url, schema=SHOP, tables="customers, orders", name="shop") as url:
        yield url


@pytest.fixture
def shop_db(shop_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DATABASE_AGENT_URL", shop_url)
    return shop_url


@pytest.fixture
def sqlite_shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(SHOP)
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{path}")
    return path


async def call(action: str, **parameters: object):
    tool = load_tool_folder(FOLDER)
    return await tool.execute(
        ToolRequest(request_id="r1", action=action, parameters=parameters, user_id="ada")
    )


async def test_a_query_reads_rows_with_named_parameters_under_the_row_limit(
    shop_db: str, monkeypatch
):
    monkeypatch.setenv("DATABASE_AGENT_MAX_ROWS", "2")

    paris = await call(
        "query",
        sql="SELECT c.name, sum(o.total) AS spent, max(o.placed) AS last FROM customers c "
        "JOIN orders o ON o.customer_id = c.id WHERE c.city = :city GROUP BY c.name",
        parameters={"city": "Paris"},
    )
    everyone = await call("query", sql="SELECT id, name FROM customers ORDER BY id", max_rows=50)

    assert paris.data == {
        "columns": ["name", "spent", "last"],
        "rows": [{"name": "Bob", "spent": "95.25", "last": "2026-11-03"}],
        "row_count": 1,
        "truncated": False,
    }
    assert paris.message == "1 row (name, spent, last)"
    assert paris.metadata == {"provider": "postgresql"}
    assert everyone.data["rows"] == [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}], (
        "the limit caps max_rows"
    )
    assert (
        everyone.data["truncated"] is True and "more exist past the limit of 2" in everyone.message
    )


async def test_a_query_never_writes_neither_by_its_keyword_nor_hidden_in_a_cte(shop_db: str):
    with pytest.raises(
        ToolError, match="query only reads: 'delete' statements are writes"
    ) as keyword:
        await call("query", sql="DELETE FROM orders")
    with pytest.raises(
        ToolError, match="refused the write: cannot execute .* in a read-only transaction"
    ) as hidden:
        await call(
            "query", sql="WITH gone AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM gone"
        )

    assert keyword.value.code == hidden.value.code == "read_only"
    assert (await call("query", sql="SELECT count(*) AS n FROM orders")).data["rows"] == [{"n": 3}]


async def test_writes_are_off_unless_the_configuration_allows_them_and_then_committed(
    shop_db: str, monkeypatch
):
    with pytest.raises(ToolError, match="Writes are off for this database") as off:
        await call(
            "write",
            sql="UPDATE customers SET city = :city WHERE id = :id",
            parameters={"city": "Rome", "id": 1},
        )
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "true")

    moved = await call(
        "write",
        sql="UPDATE customers SET city = :city WHERE id = :id",
        parameters={"city": "Rome", "id": 1},
    )
    added = await call(
        "write",
        sql="INSERT INTO customers VALUES (4, :name, NULL) RETURNING id, name",
        parameters={"name": "Di"},
    )

    assert off.value.code == "writes_disabled" and not off.value.recoverable
    assert moved.message == "Done: 1 row affected." and moved.data == {"rows_affected": 1}
    assert added.data["rows"] == [{"id": 4, "name": "Di"}]
    rows = (
        await call("query", sql="SELECT name, city FROM customers WHERE id IN (1, 4) ORDER BY id")
    ).data["rows"]
    assert rows == [{"name": "Ada", "city": "Rome"}, {"name": "Di", "city": None}]
    with pytest.raises(
        InvalidToolArgumentsError, match="write is for statements that change data; 'select' reads"
    ):
        await call("write", sql="SELECT 1")
    with pytest.raises(InvalidToolArgumentsError, match="refused the statement: .*duplicate key"):
        await call("write", sql="INSERT INTO customers VALUES (4, 'again', NULL)")


async def test_the_schema_is_described_on_request_and_an_unknown_table_is_not_found(shop_db: str):
    everything = await call("describe_schema")
    orders = await call("describe_schema", table="ORDERS")

    assert everything.message.splitlines() == [
        "customers(id INTEGER pk, name TEXT not null, city TEXT)",
        "orders(id INTEGER pk, customer_id INTEGER not null -> customers(id), total NUMERIC(10, 2) not null,"
        " placed DATE not null)",
    ]
    assert [t["name"] for t in orders.data["tables"]] == ["orders"]
    assert orders.data["tables"][0]["foreign_keys"] == [
        {"columns": ["customer_id"], "references": "customers(id)"}
    ]
    with pytest.raises(
        ToolError, match="There is no table or view 'invoices'; there are: customers, orders"
    ) as missing:
        await call("describe_schema", table="invoices")
    assert missing.value.code == "not_found"


async def test_sqlite_reads_writes_when_allowed_and_refuses_writes_in_a_query(
    sqlite_shop: Path, monkeypatch
):
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "1")

    counted = await call(
        "query", sql="SELECT city, count(*) AS n FROM customers GROUP BY city ORDER BY city"
    )
    written = await call(
        "write", sql="DELETE FROM orders WHERE total < :least", parameters={"least": 20}
    )
    with pytest.raises(
        ToolError, match="refused the write: attempt to write a readonly database"
    ) as refused:
        await call("query", sql="WITH x AS (SELECT 1) DELETE FROM orders")
    schema = await call("describe_schema", table="customers")

    assert counted.data["rows"] == [{"city": "London", "n": 1}, {"city": "Paris", "n": 2}]
    assert counted.metadata == {"provider": "sqlite"}
    assert written.data == {"rows_affected": 1}
    assert refused.value.code == "read_only"
    assert schema.message == "customers(id INTEGER pk, name TEXT not null, city TEXT)"
    with sqlite3.connect(sqlite_shop) as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (2,)


async def test_each_failure_is_a_clear_error(shop_url: str, tmp_path: Path, monkeypatch):
    monkeypatch.setenv(
        "DATABASE_AGENT_URL",
        make_url(shop_url).set(password="wrong").render_as_string(hide_password=False),
    )
    with pytest.raises(
        ToolError, match="refused the login: .*password authentication failed"
    ) as login:
        await call("query", sql="SELECT 1")
    monkeypatch.setenv("DATABASE_AGENT_URL", f"postgresql://clerk:pw@127.0.0.1:{free_port()}/shop")
    with pytest.raises(
        ToolError, match=r"Could not reach the postgresql database shop at 127.0.0.1:\d+"
    ) as down:
        await call("query", sql="SELECT 1")
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{tmp_path / 'nowhere.db'}")
    with pytest.raises(ToolError, match="There is no SQLite database at .*nowhere.db") as no_file:
        await call("query", sql="SELECT 1")
    monkeypatch.setenv("DATABASE_AGENT_URL", shop_url)
    with pytest.raises(ToolError, match='relation "invoices" does not exist') as no_table:
        await call("query", sql="SELECT * FROM invoices")
    monkeypatch.delenv("DATABASE_AGENT_URL")
    with pytest.raises(
        ToolError, match="database_agent is not configured: url: Field required"
    ) as unset:
        await call("query", sql="SELECT 1")

    assert (login.value.code, login.value.recoverable) == ("bad_credentials", False)
    assert (down.value.code, down.value.recoverable) == ("server_unreachable", True)
    assert no_file.value.code == no_table.value.code == "not_found"
    assert unset.value.code == "not_configured"
    assert "wrong" not in str(login.value), "the password is not repeated"


def test_orchestrator_run_takes_json_and_words(cli, shop_db: str, tmp_path: Path):
    approved_copy(cli, tmp_path, "database_agent")

    structured = cli(
        "run",
        "database_agent",
        "query",
        "--json",
        json.dumps(
            {
                "sql": "SELECT name FROM customers WHERE city = :city ORDER BY id",
                "parameters": {"city": "Paris"},
            }
        ),
        cwd=tmp_path,
    )
    sentence = cli(
        "run", "database_agent", "query", "SELECT count(*) AS n FROM orders", cwd=tmp_path
    )
    pairs = cli("run", "database_agent", "describe_schema", "table: customers", cwd=tmp_path)
    refused = cli(
        "run", "database_agent", "query", "--json", '{"sql": "DROP TABLE orders"}', cwd=tmp_path
    )

    assert structured.returncode == 0, structured.stderr
    envelope = json.loads(structured.stdout)
    assert envelope["success"] is True
    assert envelope["data"]["rows"] == [{"name": "Bob"}, {"name": "Cy"}]
    assert envelope["metadata"]["operation"] == "database_agent.query"
    assert envelope["metadata"]["provider"] == "postgresql"
    assert sentence.returncode == 0, sentence.stderr
    assert sentence.stdout.splitlines()[0] == "1 row (n)"
    assert "'n': 3" in sentence.stdout or '"n": 3' in sentence.stdout
    assert pairs.returncode == 0 and pairs.stdout.startswith("customers(id INTEGER pk")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "read_only"


def test_a_write_asks_first_and_a_rejected_one_does_not_run(
    cli, shop_db: str, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("DATABASE_AGENT_ALLOW_WRITES", "true")
    approved_copy(cli, tmp_path, "database_agent")
    insert = json.dumps(
        {"sql": "INSERT INTO customers VALUES (:id, 'Eve', 'Oslo')", "parameters": {"id": 50}}
    )

    rejected = cli(
        "run", "database_agent", "write", "--json", insert, cwd=tmp_path, stdin="n not today\n"
    )
    approved = cli("run", "database_agent", "write", "--json", insert, cwd=tmp_path, stdin="y\n")

    assert "database_agent_write" in rejected.stderr, "the question was shown"
    assert rejected.returncode == 1
    assert json.loads(rejected.stdout)["error"]["code"] == "rejected"
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["data"] == {"rows_affected": 1}
    with psycopg.connect(shop_db) as connection:
        assert connection.execute("SELECT count(*) FROM customers WHERE id = 50").fetchone() == (1,)


REPORTING = """
CREATE SCHEMA reporting;
GRANT USAGE ON SCHEMA reporting TO PUBLIC;
CREATE TABLE reporting."Big Spenders" (name text, total numeric(10, 2));
INSERT INTO reporting."Big Spenders" VALUES ('Ada', 120.50);
CREATE VIEW reporting.paris AS SELECT name FROM customers WHERE city = 'Paris';
"""


@pytest.fixture(scope="module")
def reporting_url(postgres_url: str) -> Iterator[str]:
    """The shop with a second schema holding a table whose name needs quoting, and a view."""
    with scratch_database(
        postgres_url,
        schema=SHOP + REPORTING,
        tables='customers, orders, reporting."Big Spenders", reporting.paris',
        name="reports",
    ) as url:
        yield url


async def test_schemas_are_listed_with_their_tables_and_views(
    reporting_url: str, sqlite_shop: Path, monkeypatch
):
    sqlite = await call("list_schemas")
    monkeypatch.setenv("DATABASE_AGENT_URL", reporting_url)
    postgres = await call("list_schemas")

    assert sqlite.message == "main: customers, orders"
    assert postgres.message.splitlines() == [
        "public: customers, orders",
        "reporting: Big Spenders; views: paris",
    ]
    assert postgres.data["schemas"][1] == {
        "name": "reporting",
        "tables": ["Big Spenders"],
        "views": ["paris"],
        "not_listed": 0,
    }


async def test_a_schema_of_many_tables_names_the_first_and_counts_the_rest(
    tmp_path: Path, monkeypatch
):
    path = tmp_path / "wide.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("".join(f"CREATE TABLE t{n:03} (x);" for n in range(203)))
        connection.execute("CREATE VIEW v AS SELECT 1")
    monkeypatch.setenv("DATABASE_AGENT_URL", f"sqlite:///{path}")

    listed = await call("list_schemas")

    [main] = listed.data["schemas"]
    assert (len(main["tables"]), main["views"], main["not_listed"]) == (200, [], 4)
    assert listed.message.endswith(
        "t199; and 4 more (describe_schema with schema_name 'main' names them all)"
    )


async def test_sample_rows_shows_the_first_rows_of_a_table_or_view(
    reporting_url: str, sqlite_shop: Path, monkeypatch
):
    monkeypatch.setenv("DATABASE_AGENT_MAX_ROWS", "2")
    sqlite = await call("sample_rows", table="CUSTOMERS", rows=1)
    monkeypatch.setenv("DATABASE_AGENT_URL", reporting_url)
    capped = await call("sample_rows", table="customers", rows=50)
    quoted = await call("sample_rows", table="big spenders", schema_name="reporting")
    view = await call("sample_rows", table="paris", schema_name="reporting")
    with pytest.raises(ToolError, match="no table or view 'invoices' in schema 'reporting'") as no:
        await call("sample_rows", table="invoices", schema_name="reporting")

    assert sqlite.data == {
        "columns": ["id", "name", "city"],
        "rows": [{"id": 1, "name": "Ada", "city": "London"}],
        "row_count": 1,
        "truncated": True,
    }
    assert capped.data["row_count"] == 2 and capped.data["truncated"] is True, "max_rows caps it"
    assert quoted.data["rows"] == [{"name": "Ada", "total": "120.50"}]
    assert quoted.message == "1 row (name, total)"
    assert {row["name"] for row in view.data["rows"]} == {"Bob", "Cy"}
    assert (no.value.code, no.value.recoverable) == ("not_found", False)


async def test_explain_shows_the_plan_without_running_the_statement(shop_db: str):
    read = await call(
        "explain", sql="SELECT name FROM customers WHERE city = :city", parameters={"city": "Paris"}
    )
    delete = await call("explain", sql="DELETE FROM orders WHERE total > 0")
    with pytest.raises(InvalidToolArgumentsError, match="without EXPLAIN: 'explain'"):
        await call("explain", sql="EXPLAIN ANALYZE DELETE FROM orders")
    with pytest.raises(ToolError, match="syntax error") as analyze:
        await call("explain", sql="ANALYZE DELETE FROM orders")

    assert read.data["plan"][0].startswith("Seq Scan on customers")
    assert "Filter: (city = 'Paris'::text)" in read.message
    assert delete.data["plan"][0].startswith("Delete on orders")
    assert analyze.value.code == "invalid_arguments"
    with psycopg.connect(shop_db) as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (3,)


async def test_explain_on_sqlite_indents_each_step_under_its_parent(sqlite_shop: Path):
    plan = await call(
        "explain",
        sql="SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders "
        "WHERE total > :least)",
        parameters={"least": 100},
    )

    assert plan.data["plan"][0] == "SEARCH customers USING INTEGER PRIMARY KEY (rowid=?)"
    assert plan.data["plan"][1].startswith("LIST SUBQUERY")
    assert plan.data["plan"][2].startswith("  SCAN orders")
    assert plan.metadata == {"provider": "sqlite"}


def test_orchestrator_run_lists_samples_and_explains(cli, shop_db: str, tmp_path: Path):
    approved_copy(cli, tmp_path, "database_agent")

    listed = cli("run", "database_agent", "list_schemas", cwd=tmp_path)
    sampled = cli("run", "database_agent", "sample_rows", "table: orders, rows: 1", cwd=tmp_path)
    explained = cli(
        "run",
        "database_agent",
        "explain",
        "--json",
        '{"sql": "SELECT * FROM orders"}',
        cwd=tmp_path,
    )

    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == "public: customers, orders"
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout.splitlines()[0] == (
        "1 row (id, customer_id, total, placed); more exist past the limit of 1: "
        "use query for the rows you need"
    )
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["data"]["plan"][0].startswith("Seq Scan on orders")
