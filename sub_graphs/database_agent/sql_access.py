"""Connections to the configured database: read-only unless writing, errors said for the model.

Read-only and the time limit are the database session's own rules where the dialect has
them (sessions.py), and every read transaction is rolled back, never committed. A
statement the database refuses or stops, a login it rejects or a server it cannot reach
is a `ToolError` naming what happened, never a traceback.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import re
import sqlite3
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict
from sqlalchemy import Connection, Engine, exc
from sqlalchemy.engine import URL, make_url

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools import ToolSettings

from .sessions import guarded_engine

# Statements a read may start with; anything else is refused before it reaches the database.
READ_KEYWORDS = frozenset(
    {"select", "with", "show", "explain", "describe", "desc", "values", "table"}
)
# SQLSTATE class 28: invalid authorization (a wrong password, an unknown role).
BAD_LOGIN_CLASS = "28"
# PostgreSQL's "cannot execute ... in a read-only transaction".
READ_ONLY_SQLSTATE = "25006"
# PostgreSQL's query_canceled: statement_timeout stopped it.
CANCELED_SQLSTATE = "57014"
# MySQL: max_execution_time exceeded. SQLite's progress handler: "interrupted".
MYSQL_TIMED_OUT = 3024
# insufficient_privilege: the login may not read or change it.
REFUSED_SQLSTATES = frozenset({"42501"})
# undefined_table, invalid_schema_name, invalid_catalog_name (no such database).
NOT_FOUND_SQLSTATES = frozenset({"42P01", "3F000", "3D000"})
# MySQL: a command denied to the login (on a table, a column, a routine; a privilege).
MYSQL_REFUSED = frozenset({1142, 1143, 1227, 1370})
# MySQL: no such table, no such database.
MYSQL_NOT_FOUND = frozenset({1146, 1049})
# lock_not_available (PostgreSQL's lock_timeout); MySQL's lock wait timeout; SQLite's words
# past its busy timeout (the `timeout` of the url, 5 seconds unless it says).
BUSY_SQLSTATES = frozenset({"55P03"})
MYSQL_BUSY = frozenset({1205})
BUSY_WORDS = re.compile(r"database is locked|database table is locked")
# What carries no SQLSTATE: libpq's refusals at connect time, and SQLite's words.
REFUSED_WORDS = re.compile(r"permission denied")
NOT_FOUND_WORDS = re.compile(r'no such table|database ".*" does not exist')
BAD_LOGIN_PHRASES = ("authentication failed", "no pg_hba.conf entry", "access denied for user")
# MySQL's error numbers for a refused login.
MYSQL_BAD_LOGIN = frozenset({1044, 1045, 1698})


class DatabaseSettings(ToolSettings):
    """The database: `config` of tool_config.yaml, overridden by DATABASE_AGENT_* variables."""

    model_config = SettingsConfigDict(env_prefix="DATABASE_AGENT_")

    url: SecretStr
    allow_writes: bool = False
    max_rows: int = Field(default=100, ge=1, le=10_000)
    statement_timeout_seconds: float = Field(default=30, gt=0)


def engine_for(settings: DatabaseSettings, *, write: bool) -> Engine:
    """An engine without a pool: each call connects and leaves nothing open behind it.

    Its sessions are read-only unless `write`, and hold statement_timeout_seconds.
    """
    try:
        url = _with_driver(make_url(settings.url.get_secret_value()))
        _sqlite_file_exists(url)
        return guarded_engine(url, write=write, timeout_seconds=settings.statement_timeout_seconds)
    except (exc.ArgumentError, ValueError) as error:
        raise ToolError(
            f"database_agent's url is not a SQLAlchemy URL: {error}",
            code="not_configured",
            recoverable=False,
        ) from None
    except ImportError as error:
        raise ToolError(
            f"database_agent's url needs a driver that is not installed: {error.name or error} "
            "(install it into the orchestrator's environment)",
            code="not_configured",
            recoverable=False,
        ) from None


def _sqlite_file_exists(url: URL) -> None:
    # SQLite makes an empty database where a path names none: a typo would read as "no tables".
    database = url.database or ""
    if (
        url.get_backend_name() != "sqlite"
        or database in ("", ":memory:")
        or database.startswith("file:")
    ):
        return
    if not Path(database).expanduser().is_file():
        raise ToolError(
            f"There is no SQLite database at {database} (database_agent's url)",
            code="not_found",
            recoverable=False,
        )


def _with_driver(url: URL) -> URL:
    # SQLAlchemy's default PostgreSQL driver is psycopg2; the orchestrator ships psycopg 3.
    if url.drivername == "postgresql":
        return url.set(drivername="postgresql+psycopg")
    return url


@contextmanager
def transaction(engine: Engine, *, write: bool) -> Iterator[Connection]:
    """A connection in a transaction: committed after a write, always rolled back after a read."""
    with failures(engine), engine.connect() as connection:
        try:
            yield connection
        except BaseException:
            connection.rollback()
            raise
        if write:
            connection.commit()
        else:
            connection.rollback()


@contextmanager
def failures(engine: Engine) -> Iterator[None]:
    """Database errors as ToolErrors: unreachable, login refused, statement refused."""
    where = _where(engine.url)
    try:
        yield
    except exc.DBAPIError as error:
        raise _tool_error(error, where=where) from None


def _tool_error(error: exc.DBAPIError, *, where: str) -> ToolError:
    detail = _first_line(error.orig) if error.orig is not None else _first_line(error)
    if _bad_login(error.orig):
        return ToolError(
            f"{where} refused the login: {detail}", code="bad_credentials", recoverable=False
        )
    if _timed_out(error.orig):
        return ToolError(
            f"{where} stopped the statement at its time limit (statement_timeout_seconds): "
            f"{detail}; narrow the query",
            code="statement_timeout",
            recoverable=False,
        )
    if _matches(error.orig, BUSY_SQLSTATES, MYSQL_BUSY, BUSY_WORDS):
        return ToolError(
            f"{where} is busy: {detail} (another connection held a lock past the wait); "
            "try again shortly",
            code="database_busy",
            recoverable=True,
        )
    if _read_only_refusal(error.orig):
        return ToolError(
            f"{where} refused the write: {detail} (query only reads)",
            code="read_only",
            recoverable=False,
        )
    if _matches(error.orig, REFUSED_SQLSTATES, MYSQL_REFUSED, REFUSED_WORDS):
        return ToolError(
            f"{where} refused: {detail} (the login database_agent uses may not do it)",
            code="refused",
            recoverable=False,
        )
    if _matches(error.orig, NOT_FOUND_SQLSTATES, MYSQL_NOT_FOUND, NOT_FOUND_WORDS):
        return ToolError(
            f"{where}: {detail} (list_schemas names the schemas and tables there are)",
            code="not_found",
            recoverable=False,
        )
    if error.connection_invalidated or (
        isinstance(error, exc.OperationalError) and _is_connection_failure(error)
    ):
        return ToolError(
            f"Could not reach {where[0].lower()}{where[1:]}: {detail}", code="server_unreachable"
        )
    return InvalidToolArgumentsError(f"{where} refused the statement: {detail}")


def _timed_out(orig: BaseException | None) -> bool:
    if getattr(orig, "sqlstate", None) == CANCELED_SQLSTATE:
        return True
    arguments = getattr(orig, "args", ())
    if arguments and arguments[0] == MYSQL_TIMED_OUT:
        return True
    return isinstance(orig, sqlite3.OperationalError) and str(orig) == "interrupted"


def _read_only_refusal(orig: BaseException | None) -> bool:
    if getattr(orig, "sqlstate", None) == READ_ONLY_SQLSTATE:
        return True
    text = str(orig).lower()
    return "readonly database" in text or "read-only transaction" in text


def _matches(
    orig: BaseException | None,
    sqlstates: frozenset[str],
    mysql_numbers: frozenset[int],
    words: re.Pattern[str],
) -> bool:
    """Whether the driver's error is one of these: by SQLSTATE, MySQL's number, else its words."""
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate in sqlstates
    arguments = getattr(orig, "args", ())
    if arguments and arguments[0] in mysql_numbers:
        return True
    return words.search(str(orig).lower()) is not None


def _bad_login(orig: BaseException | None) -> bool:
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate.startswith(BAD_LOGIN_CLASS)
    arguments = getattr(orig, "args", ())
    if arguments and arguments[0] in MYSQL_BAD_LOGIN:
        return True
    # libpq reports a refused login at connect time with no SQLSTATE, only its words.
    text = str(orig).lower()
    return any(phrase in text for phrase in BAD_LOGIN_PHRASES)


def _is_connection_failure(error: exc.OperationalError) -> bool:
    # psycopg says nothing by SQLSTATE when no server answered; SQLite cannot open its file.
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate is not None:
        return sqlstate.startswith("08")
    text = str(error.orig).lower()
    return any(
        phrase in text
        for phrase in ("connection", "could not connect", "unable to open database", "timeout")
    )


def _where(url: URL) -> str:
    if url.get_backend_name() == "sqlite":
        return f"The SQLite database {url.database or ':memory:'}"
    socket = url.query.get("host")
    host = url.host or (socket if isinstance(socket, str) else None) or "localhost"
    port = f":{url.port}" if url.port else ""
    return f"The {url.get_backend_name()} database {url.database or ''} at {host}{port}".replace(
        "  ", " "
    )


def _first_line(error: object) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def jsonable(value: object) -> object:
    """A value of a row as JSON can carry it: dates as ISO text, exact decimals (NUMERIC) as
    text holding each digit (`"120.50"`), bytes as base64."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        # Text, every digit as the database sent it: a float would round 0.1 or a 20-digit sum.
        return format(value, "f")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(item) for item in value]
    return str(value)
