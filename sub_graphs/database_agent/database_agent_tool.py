"""SQL on the database the folder's configuration names: reads, a schema, and writes if allowed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from pydantic import BaseModel, Field
from sqlalchemy import Connection, Row, inspect, literal_column, select, table, text

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .plans import explained, plan_lines
from .schema import describe, resolve, schemas, schemas_summary, summary
from .sql_access import (
    READ_KEYWORDS,
    DatabaseSettings,
    engine_for,
    failures,
    jsonable,
    transaction,
)
from .statements import sole_statement

Scalar = str | int | float | bool | None

READ_ONLY = (
    "query only reads: {keyword!r} statements are writes; use write (if this folder's "
    "configuration allows writes)"
)
WRITES_OFF = (
    "Writes are off for this database: database_agent's configuration says allow_writes: false "
    "(set DATABASE_AGENT_ALLOW_WRITES=true, or allow_writes in its tool_config.yaml, to allow them)"
)
NOT_A_READ = "write is for statements that change data; {keyword!r} reads: use query"
EXPLAIN_ONLY = "explain takes the statement itself, without EXPLAIN: {keyword!r} begins it"
# Rows sample_rows shows unless asked for more (the configured row limit caps it).
SAMPLE_ROWS = 5


class Query(BaseModel):
    sql: str = Field(
        min_length=1,
        description="One read-only SQL statement (SELECT, WITH, EXPLAIN...). Put values in "
        "named placeholders such as :city, never in the text.",
    )
    parameters: dict[str, Scalar] = Field(
        default_factory=dict,
        description='Values for the named placeholders, e.g. {"city": "Paris"} for :city.',
    )
    max_rows: int | None = Field(
        default=None,
        ge=1,
        description="Return at most this many rows (the configured row limit caps it).",
    )


class Write(BaseModel):
    sql: str = Field(
        min_length=1,
        description="One SQL statement that changes data or tables (INSERT, UPDATE, DELETE, "
        "CREATE...), with values in named placeholders such as :id.",
    )
    parameters: dict[str, Scalar] = Field(
        default_factory=dict,
        description='Values for the named placeholders, e.g. {"id": 7} for :id.',
    )


class DescribeSchema(BaseModel):
    table: str | None = Field(
        default=None, description="One table or view to describe; all of them when left out."
    )
    schema_name: str | None = Field(
        default=None, description="The database schema (PostgreSQL: public when left out)."
    )


class ListSchemas(BaseModel):
    """No parameters: every schema the login can see."""


class SampleRows(BaseModel):
    table: str = Field(min_length=1, description="The table or view to show rows of.")
    schema_name: str | None = Field(
        default=None, description="The database schema (PostgreSQL: public when left out)."
    )
    rows: int = Field(
        default=SAMPLE_ROWS,
        ge=1,
        description="How many rows to show (the configured row limit caps it).",
    )


class Explain(BaseModel):
    sql: str = Field(
        min_length=1,
        description="One SQL statement (a query, or a write you mean to run) to see the plan "
        "of, without EXPLAIN in front; values in named placeholders such as :city.",
    )
    parameters: dict[str, Scalar] = Field(
        default_factory=dict,
        description='Values for the named placeholders, e.g. {"city": "Paris"} for :city.',
    )


class DatabaseAgent(Tool):
    """Runs parameterised SQL on the configured database."""

    settings_model = DatabaseSettings

    @action(Query)
    def query(self, params: Query, request: ToolRequest) -> ToolResult:
        """Run a read-only SQL query with named parameters; returns columns and rows (limited)."""
        settings = self._settings()
        keyword = sole_statement(params.sql)
        if keyword not in READ_KEYWORDS:
            raise ToolError(READ_ONLY.format(keyword=keyword), code="read_only", recoverable=False)
        limit = min(params.max_rows or settings.max_rows, settings.max_rows)
        engine = engine_for(settings, write=False)
        with transaction(engine, write=False) as connection:
            result = connection.execute(text(params.sql), params.parameters)
            columns = list(result.keys())
            fetched = result.fetchmany(limit + 1)
        return _rows_result(request, columns, fetched, limit=limit, provider=engine.dialect.name)

    @action(Write, sensitive=True)
    def write(self, params: Write, request: ToolRequest) -> ToolResult:
        """Run one SQL statement that changes data or tables, if writes are allowed; committed."""
        settings = self._settings()
        if not settings.allow_writes:
            raise _writes_off()
        keyword = sole_statement(params.sql)
        if keyword in READ_KEYWORDS - {"with"}:
            raise InvalidToolArgumentsError(NOT_A_READ.format(keyword=keyword))
        engine = engine_for(settings, write=True)
        with transaction(engine, write=True) as connection:
            outcome = _write(connection, params)
        count = outcome["rows_affected"]
        message = (
            "Done."
            if count is None or count < 0
            else f"Done: {count} row{'s' if count != 1 else ''} affected."
        )
        return request.result(message, data=outcome, metadata={"provider": engine.dialect.name})

    @action(DescribeSchema)
    def describe_schema(self, params: DescribeSchema, request: ToolRequest) -> ToolResult:
        """Describe the database's tables and views: columns, types, primary and foreign keys."""
        settings = self._settings()
        engine = engine_for(settings, write=False)
        with failures(engine), engine.connect() as connection:
            tables = describe(connection, schema=params.schema_name, table=params.table)
        return request.result(
            summary(tables), data={"tables": tables}, metadata={"provider": engine.dialect.name}
        )

    @action(ListSchemas)
    def list_schemas(self, params: ListSchemas, request: ToolRequest) -> ToolResult:
        """List the database's schemas and the names of their tables and views."""
        del params
        engine = engine_for(self._settings(), write=False)
        with transaction(engine, write=False) as connection:
            found = schemas(connection)
        return request.result(
            schemas_summary(found),
            data={"schemas": found},
            metadata={"provider": engine.dialect.name},
        )

    @action(SampleRows)
    def sample_rows(self, params: SampleRows, request: ToolRequest) -> ToolResult:
        """Show the first few rows of a table or view, to see what its values look like."""
        settings = self._settings()
        limit = min(params.rows, settings.max_rows)
        engine = engine_for(settings, write=False)
        with transaction(engine, write=False) as connection:
            name = resolve(inspect(connection), params.table, schema=params.schema_name)
            # The names quoted by SQLAlchemy: a table is never SQL text of the model's.
            chosen = select(literal_column("*")).select_from(table(name, schema=params.schema_name))
            result = connection.execute(chosen.limit(limit + 1))
            columns = list(result.keys())
            fetched = result.fetchall()
        return _rows_result(
            request,
            columns,
            fetched,
            limit=limit,
            provider=engine.dialect.name,
            advice="use query for the rows you need",
        )

    @action(Explain)
    def explain(self, params: Explain, request: ToolRequest) -> ToolResult:
        """Show how the database would run one statement (its plan), without running it."""
        keyword = sole_statement(params.sql)
        if keyword == "explain":
            raise InvalidToolArgumentsError(EXPLAIN_ONLY.format(keyword=keyword))
        engine = engine_for(self._settings(), write=False)
        with transaction(engine, write=False) as connection:
            result = connection.execute(
                text(explained(engine.dialect.name, params.sql)), params.parameters
            )
            lines = plan_lines(list(result.keys()), result.fetchall())
        return request.result(
            "\n".join(lines) or "The database gave no plan.",
            data={"plan": lines},
            metadata={"provider": engine.dialect.name},
        )

    def configuration_problem(self, *, action: str | None = None) -> ToolError | None:
        """Its settings unreadable; or `write` while the configuration turns writes off, said
        before anyone is asked to approve a write that could not run."""
        problem = super().configuration_problem(action=action)
        if problem is None and action == "write" and not self._settings().allow_writes:
            return _writes_off()
        return problem

    def _settings(self) -> DatabaseSettings:
        return self.settings(DatabaseSettings)


def _writes_off() -> ToolError:
    return ToolError(WRITES_OFF, code="writes_disabled", recoverable=False)


def _rows_result(
    request: ToolRequest,
    columns: list[str],
    fetched: Sequence[Row[tuple[object, ...]]],
    *,
    limit: int,
    provider: str,
    advice: str = "narrow the query",
) -> ToolResult:
    """At most `limit` of the `fetched` rows as JSON; `truncated` when more were there."""
    rows = [
        {column: jsonable(value) for column, value in zip(columns, row, strict=True)}
        for row in fetched[:limit]
    ]
    truncated = len(fetched) > limit
    return request.result(
        _rows_message(len(rows), columns, truncated=truncated, limit=limit, advice=advice),
        data={"columns": columns, "rows": rows, "row_count": len(rows), "truncated": truncated},
        metadata={"provider": provider},
    )


def _rows_message(
    count: int, columns: list[str], *, truncated: bool, limit: int, advice: str
) -> str:
    if not columns:
        return "The statement returned no columns."
    shown = f"{count} row{'s' if count != 1 else ''} ({', '.join(columns)})"
    return shown + (f"; more exist past the limit of {limit}: {advice}" if truncated else "")


class Written(TypedDict):
    """What a write did: the rows it changed (None: the driver cannot say), any it returned."""

    rows_affected: int | None
    columns: NotRequired[list[str]]
    rows: NotRequired[list[dict[str, object]]]


def _write(connection: Connection, params: Write) -> Written:
    result = connection.execute(text(params.sql), params.parameters)
    if result.returns_rows:
        columns = list(result.keys())
        rows = [
            {c: jsonable(v) for c, v in zip(columns, row, strict=True)} for row in result.fetchall()
        ]
        return {"rows_affected": result.rowcount, "columns": columns, "rows": rows}
    return {"rows_affected": result.rowcount}
