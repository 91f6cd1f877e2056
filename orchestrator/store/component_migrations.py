"""The migrations of one component other than the core: a tool folder's `migrations/NNN_name.sql`.

Each is recorded in `schema_migrations` under the component (the folder's key)
and its version, with the SHA-256 of its SQL. A migration that ran is never run
again, and one whose SQL changed since it ran is refused
(`ComponentMigrationError`): a released migration is never edited, a change is
a new file. They run as the database's owner, each in its own transaction under
the schema's lock, after the core migrations (whose `orchestrator_protect`
they may call).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from psycopg.errors import InsufficientPrivilege
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.errors import ComponentMigrationError
from orchestrator.store.engine import Database
from orchestrator.store.migrations import CORE, lock, run_script, upgrade
from orchestrator.store.privileges import migration_privileges

FILE_NAME = re.compile(r"^(\d{3})_([a-z0-9][a-z0-9_]*)\.sql$")
APPLIED = text("SELECT version, checksum FROM schema_migrations WHERE component = :component")
RECORD = text(
    "INSERT INTO schema_migrations (component, version, description, checksum) "
    "VALUES (:component, :version, :description, :checksum)"
)


@dataclass(frozen=True)
class ComponentMigration:
    """One migration of a component: its version, its name, its SQL and the SQL's SHA-256."""

    version: int
    name: str
    sql: str
    checksum: str
    file: str  # what it is called where it comes from, for messages


def read_migrations(files: Mapping[str, bytes]) -> tuple[ComponentMigration, ...]:
    """The migrations in `files` (file name -> content), ordered by version.

    Each name is `NNN_name.sql` (three digits, then lowercase letters, digits
    and `_`); no two share a version. ComponentMigrationError says which file
    is wrong otherwise.
    """
    found: dict[int, ComponentMigration] = {}
    for file, content in sorted(files.items()):
        migration = _migration(file, content)
        if migration.version in found:
            other = found[migration.version].file
            raise ComponentMigrationError(f"{file} and {other} have the same version number")
        found[migration.version] = migration
    return tuple(found[version] for version in sorted(found))


def _migration(file: str, content: bytes) -> ComponentMigration:
    name = file.rsplit("/", 1)[-1]
    match = FILE_NAME.match(name)
    if match is None:
        raise ComponentMigrationError(
            f"{file}: a migration is named NNN_name.sql (e.g. 001_create_notes.sql)"
        )
    try:
        sql = content.decode("utf-8")
    except UnicodeDecodeError:
        raise ComponentMigrationError(f"{file} is not UTF-8 text") from None
    checksum = hashlib.sha256(content).hexdigest()
    return ComponentMigration(int(match[1]), match[2], sql, checksum, file)


async def migrate_component(
    database: Database, component: str, migrations: Sequence[ComponentMigration]
) -> list[ComponentMigration]:
    """Apply the component's migrations that have not run; the ones applied.

    The core schema is brought up to date first. Raises ComponentMigrationError,
    leaving the database as it was before the failing migration, when one that
    ran has changed since or one fails.
    """
    if component == CORE:
        raise ComponentMigrationError(f"{CORE!r} is the core schema's component, not a folder's")
    await upgrade(database)
    applied: list[ComponentMigration] = []
    with migration_privileges(database):
        for migration in migrations:
            async with database.admin_transaction() as connection:
                await lock(connection)
                ran = await _applied(connection, component)
                if migration.version in ran:
                    _check_unchanged(migration, ran[migration.version])
                    continue
                await _run(connection, migration)
                values = {"component": component, "version": migration.version}
                await connection.execute(
                    RECORD, {**values, "description": migration.name, "checksum": migration.checksum}
                )
                applied.append(migration)
    return applied


async def _applied(connection: AsyncConnection, component: str) -> dict[int, str | None]:
    rows = await connection.execute(APPLIED, {"component": component})
    return {row[0]: row[1] for row in rows}


def _check_unchanged(migration: ComponentMigration, checksum: str | None) -> None:
    if checksum != migration.checksum:
        raise ComponentMigrationError(
            f"{migration.file} was changed after it ran on this database; a migration "
            "that ran is never edited: restore it and put the change in a new file"
        )


async def _run(connection: AsyncConnection, migration: ComponentMigration) -> None:
    try:
        await run_script(connection, migration.sql)
    except InsufficientPrivilege:
        raise  # the login's, not the folder's: said as such by `migration_privileges`
    except Exception as error:  # the folder's SQL: its failure is the folder's problem only
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ComponentMigrationError(f"{migration.file} failed: {detail}") from None
