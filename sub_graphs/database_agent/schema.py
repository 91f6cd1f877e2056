"""The database's tables and views as the model reads them: one line each, columns and keys."""

from __future__ import annotations

from sqlalchemy import Connection, inspect
from sqlalchemy.engine.reflection import Inspector

from orchestrator.errors import ToolError

# Past this many tables only their names are listed: ask for one table to see its columns.
MAX_DESCRIBED = 50


def describe(
    connection: Connection, *, schema: str | None, table: str | None
) -> list[dict[str, object]]:
    """The tables (and views) of `schema`, or only `table`, with their columns and keys."""
    inspector = inspect(connection)
    names = [*inspector.get_table_names(schema=schema), *inspector.get_view_names(schema=schema)]
    if table is not None:
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
        names = match[:1]
    if len(names) > MAX_DESCRIBED:
        return [{"name": name} for name in sorted(names)]
    return [_table(inspector, name, schema=schema) for name in sorted(names)]


def _table(inspector: Inspector, name: str, *, schema: str | None) -> dict[str, object]:
    keys = set(inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or [])
    columns = [
        {
            "name": column["name"],
            "type": str(column["type"]),
            "nullable": bool(column.get("nullable", True)),
            "primary_key": column["name"] in keys,
        }
        for column in inspector.get_columns(name, schema=schema)
    ]
    foreign = [
        {
            "columns": key["constrained_columns"],
            "references": f"{key['referred_table']}({', '.join(key['referred_columns'])})",
        }
        for key in inspector.get_foreign_keys(name, schema=schema)
    ]
    return {"name": name, "columns": columns, "foreign_keys": foreign}


def summary(tables: list[dict[str, object]]) -> str:
    """One line a table: `orders(id INTEGER pk, customer_id INTEGER -> customers(id), ...)`."""
    if not tables:
        return "The database has no tables."
    if "columns" not in tables[0]:
        names = ", ".join(str(table["name"]) for table in tables)
        return f"{len(tables)} tables (name one to see its columns): {names}"
    return "\n".join(_line(table) for table in tables)


def _line(table: dict[str, object]) -> str:
    references = {
        column: key["references"]
        for key in table["foreign_keys"]  # type: ignore[union-attr]
        for column in key["columns"]
    }
    parts = []
    for column in table["columns"]:  # type: ignore[union-attr]
        text = f"{column['name']} {column['type']}"
        if column["primary_key"]:
            text += " pk"
        if not column["nullable"] and not column["primary_key"]:
            text += " not null"
        if column["name"] in references:
            text += f" -> {references[column['name']]}"
        parts.append(text)
    return f"{table['name']}({', '.join(parts)})"
