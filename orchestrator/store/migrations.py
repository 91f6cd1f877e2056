"""The core schema: the SQL files in `schema/`, in order, recorded in `schema_migrations`.

`schema_migrations` is keyed by component and version: these migrations are
the component `core`; a tool folder's own (`migrations/NNN_name.sql`, see
`component_migrations`) are recorded under the folder's key. A migration is
never edited once released: a change is a new file at the end. `upgrade`
applies what is missing under an advisory lock, so processes that start
together do not race.

The schema is declared once: the SQL files are its DDL, as history (what a
database of any age needs to catch up); `models` declares, once, the columns
the code queries, and a test checks them against a migrated database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.engine import Database
from orchestrator.store.privileges import migration_privileges

LOCK_KEY = "orchestrator.schema"
CORE = "core"  # the component this module's migrations are recorded under
# The component of a row of `schema_migrations`, whether or not migration 8 gave the table
# its `component` column yet (before it, every row is core's).
_COMPONENT = "coalesce(to_jsonb(m) ->> 'component', 'core')"
# Every core table with a user_id, all under row-level security.
USER_TABLES = (
    "sessions", "messages", "requests", "request_events", "request_usage", "result_cache",
    "large_results", "agent_conversations",
)
SCHEMA_DIR = Path(__file__).with_name("schema")
FILE_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    """One core migration: `schema/NNN_name.sql`, whose first line says what it does."""

    version: int
    description: str
    sql: str

    @property
    def statements(self) -> tuple[str, ...]:
        """Its SQL, to run as it is (one script of several statements)."""
        return (self.sql,)


def _core_migrations() -> tuple[Migration, ...]:
    found: list[Migration] = []
    for path in sorted(SCHEMA_DIR.glob("*.sql")):
        match = FILE_NAME.match(path.name)
        if match is None:
            raise RuntimeError(f"{path} is not named NNN_name.sql")  # a packaging mistake of ours
        sql = path.read_text(encoding="utf-8")
        found.append(Migration(int(match[1]), sql.split("\n", 1)[0].removeprefix("-- "), sql))
    return tuple(found)


MIGRATIONS: tuple[Migration, ...] = _core_migrations()


async def run_script(connection: AsyncConnection, sql: str) -> None:
    """Run `sql` as it is, several statements at once: no bind parameters are read into it."""
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    if driver is None:  # never for a connection that is in a transaction
        raise RuntimeError("the connection has no psycopg connection to run SQL on")
    await driver.execute(sql)


@dataclass(frozen=True)
class SchemaStatus:
    """Which migrations a database has, and which it lacks."""

    applied: list[tuple[int, str, datetime]]
    pending: list[Migration]

    @property
    def version(self) -> int:
        return max((version for version, _, _ in self.applied), default=0)


async def upgrade(database: Database) -> list[Migration]:
    """Apply every pending migration, each in its own transaction; the ones applied."""
    if not (await schema_status(database)).pending:  # every start: one short transaction
        return []
    applied: list[Migration] = []
    with migration_privileges(database):
        for migration in MIGRATIONS:
            async with database.admin_transaction() as connection:
                await lock(connection)
                if migration.version in await _applied_versions(connection):
                    continue  # up to date, or another process got there first
                await run_script(connection, migration.sql)
                await connection.execute(
                    text("INSERT INTO schema_migrations (version, description) VALUES (:v, :d)"),
                    {"v": migration.version, "d": migration.description},
                )
                applied.append(migration)
    return applied


async def schema_status(database: Database) -> SchemaStatus:
    """The applied and pending migrations."""
    with migration_privileges(database):
        async with database.admin_transaction() as connection:
            await _ensure_version_table(connection)
            rows = (
                await connection.execute(
                    text(
                        "SELECT version, description, applied_at FROM schema_migrations m "
                        f"WHERE {_COMPONENT} = '{CORE}' ORDER BY version"
                    )
                )
            ).all()
    done = {row[0] for row in rows}
    return SchemaStatus(
        applied=[(row[0], row[1], row[2]) for row in rows],
        pending=[m for m in MIGRATIONS if m.version not in done],
    )


async def applied_migrations(database: Database) -> dict[str, set[int]]:
    """The versions applied, by component (`core`, `jobs`, a folder's key), in one transaction."""
    applied: dict[str, set[int]] = {}
    with migration_privileges(database):
        async with database.admin_transaction() as connection:
            await _ensure_version_table(connection)
            rows = await connection.execute(text(f"SELECT {_COMPONENT}, version FROM schema_migrations m"))
            for component, version in rows:
                applied.setdefault(component, set()).add(version)
    return applied


async def lock(connection: AsyncConnection) -> None:
    """Hold the schema's lock until the transaction ends (with the version table in place)."""
    await connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": LOCK_KEY})
    await _ensure_version_table(connection)


async def _ensure_version_table(connection: AsyncConnection) -> None:
    await connection.execute(
        text(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                component text NOT NULL DEFAULT 'core',
                version integer NOT NULL,
                description text NOT NULL,
                checksum text,
                applied_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (component, version)
            )"""
        )
    )


async def _applied_versions(connection: AsyncConnection) -> set[int]:
    rows = await connection.execute(
        text(f"SELECT version FROM schema_migrations m WHERE {_COMPONENT} = '{CORE}'")
    )
    return {row[0] for row in rows}
