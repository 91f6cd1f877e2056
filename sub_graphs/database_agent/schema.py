"""The database's tables and views as the model reads them: one line each, columns and keys."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from sqlalchemy import Connection, inspect
from sqlalchemy.engine.reflection import Inspector

from orchestrator.errors import ToolError

# Past this many tables only their names are listed: ask for one table to see its columns.
MAX_DESCRIBED = 50
# list_schemas names at most this many tables and views of a schema.
MAX_LISTED = 200
# The catalogs every database has, not the user's data.
SYSTEM_SCHEMAS = frozenset(
    {"information_schema", "pg_catalog", "pg_toast", "mysql", "sys", "performance_schema"}
)


class Column(TypedDict):
    """One column of a described table."""

    name: str
    type: str
    nullable: bool
    primary_key: bool


class ForeignKey(TypedDict):
    """Columns of a table and the table's columns they refer to: `customers(id)`."""

    columns: list[str]
    references: str


class Table(TypedDict):
    """A table or view: its name, and (unless many were listed) its columns and keys."""

    name: str
    columns: NotRequired[list[Column]]
    foreign_keys: NotRequired[list[ForeignKey]]


def describe(
    connection: Connection, *, schema: str | None, table: str | None
) -> list[Table]:
    """The tables (and views) of `schema`, or only `table`, with their columns and keys."""
    inspector = inspect(connection)
    names = (
        relations(inspector, schema=schema)
        if table is None
        else [resolve(inspector, table, schema=schema)]
    )
    if len(names) > MAX_DESCRIBED:
        return [{"name": name} for name in sorted(names)]
    return [_table(inspector, name, schema=schema) for name in sorted(names)]


def relations(inspector: Inspector, *, schema: str | None) -> list[str]:
    """The names of the tables and views of `schema` (the default one when None)."""
    return [*inspector.get_table_names(schema=schema), *inspector.get_view_names(schema=schema)]


def resolve(inspector: Inspector, table: str, *, schema: str | None) -> str:
    """`table` as the database spells it (exactly, else ignoring case), or `not_found`."""
    names = relations(inspector, schema=schema)
    match = [name for name in names if name == table] or [
        name for name in names if name.lower() == table.lower()
    ]
    if not match:
        raise ToolError(
            f"There is no table or view {table!r}"
            + (f" in schema {schema!r}" if schema else "")
            + f"; there are: {', '.join(sorted(names)) or 'none'}",
            code="not_found",
            recoverable=False,
        )
    return match[0]


class Schema(TypedDict):
    """A schema, the names of its tables and views, and how many more were not listed."""

    name: str
    tables: list[str]
    views: list[str]
    not_listed: int


def schemas(connection: Connection) -> list[Schema]:
    """Each schema the login can see (not the database's own catalogs), its tables and views:
    the first MAX_LISTED names of each."""
    inspector = inspect(connection)
    return [
        _schema(inspector, name)
        for name in sorted(inspector.get_schema_names())
        if name.lower() not in SYSTEM_SCHEMAS
    ]


def _schema(inspector: Inspector, name: str) -> Schema:
    tables = sorted(inspector.get_table_names(schema=name))
    views = sorted(inspector.get_view_names(schema=name))
    shown_views = max(0, MAX_LISTED - len(tables))
    return {
        "name": name,
        "tables": tables[:MAX_LISTED],
        "views": views[:shown_views],
        "not_listed": max(0, len(tables) - MAX_LISTED) + len(views) - len(views[:shown_views]),
    }


def schemas_summary(found: list[Schema]) -> str:
    """A line a schema: `public: customers, orders; views: big_orders`."""
    if not found:
        return "The database has no schemas this login can see."
    lines: list[str] = []
    for schema in found:
        line = f"{schema['name']}: {', '.join(schema['tables']) or 'no tables'}"
        if schema["views"]:
            line += f"; views: {', '.join(schema['views'])}"
        if schema["not_listed"]:
            line += (
                f"; and {schema['not_listed']} more (describe_schema with "
                f"schema_name {schema['name']!r} names them all)"
            )
        lines.append(line)
    return "\n".join(lines)


def _table(inspector: Inspector, name: str, *, schema: str | None) -> Table:
    keys = set(inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or [])
    columns: list[Column] = [
        {
            "name": column["name"],
            "type": str(column["type"]),
            "nullable": bool(column.get("nullable", True)),
            "primary_key": column["name"] in keys,
        }
        for column in inspector.get_columns(name, schema=schema)
    ]
    foreign: list[ForeignKey] = [
        {
            "columns": key["constrained_columns"],
            "references": f"{key['referred_table']}({', '.join(key['referred_columns'])})",
        }
        for key in inspector.get_foreign_keys(name, schema=schema)
    ]
    return {"name": name, "columns": columns, "foreign_keys": foreign}


def summary(tables: list[Table]) -> str:
    """One line a table: `orders(id INTEGER pk, customer_id INTEGER -> customers(id), ...)`."""
    if not tables:
        return "The database has no tables."
    if "columns" not in tables[0]:
        names = ", ".join(table["name"] for table in tables)
        return f"{len(tables)} tables (name one to see its columns): {names}"
    return "\n".join(_line(table) for table in tables)


def _line(table: Table) -> str:
    references = {
        column: key["references"]
        for key in table.get("foreign_keys", [])
        for column in key["columns"]
    }
    parts: list[str] = []
    for column in table.get("columns", []):
        text = f"{column['name']} {column['type']}"
        if column["primary_key"]:
            text += " pk"
        if not column["nullable"] and not column["primary_key"]:
            text += " not null"
        if column["name"] in references:
            text += f" -> {references[column['name']]}"
        parts.append(text)
    return f"{table['name']}({', '.join(parts)})"
