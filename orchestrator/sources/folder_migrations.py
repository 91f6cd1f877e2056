"""A tool folder's own tables: its `migrations/NNN_name.sql`, applied once it is approved.

They are part of the folder's hash, and run from the bytes that were hashed, so
the SQL that runs is the SQL the person approved. They run in the database of
the folder's level, recorded under the folder's key (see
`store.component_migrations`); a folder whose level has no database (a run
without storage) gets none, as its tool gets no database to use either.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from orchestrator.errors import ComponentMigrationError

if TYPE_CHECKING:
    from orchestrator.folders.discovery import ToolFolder
    from orchestrator.levels import LevelDatabase
    from orchestrator.store.component_migrations import ComponentMigration


def migrate_folder(folder: ToolFolder, database: LevelDatabase | None) -> None:
    """Apply the approved `folder`'s migrations that have not run in `database`.

    Raises ComponentMigrationError (a ToolLoadError: the folder is skipped, the
    rest loads) for a bad file, a file changed since it ran, or failing SQL.
    """
    if not folder.migrations or database is None:
        return
    from orchestrator.store.component_migrations import read_migrations

    migrations = read_migrations(folder.migrations)
    try:
        _run_apart(database.libpq_url, folder.key, migrations)
    except ComponentMigrationError:
        raise
    except Exception as error:  # the database could not be reached: this folder cannot be used
        from orchestrator.settings import hide_passwords

        lines = str(error).strip().splitlines()
        detail = hide_passwords(lines[0] if lines else type(error).__name__, database.libpq_url)
        raise ComponentMigrationError(f"migrations/ could not be applied: {detail}") from None


def _run_apart(url: str, component: str, migrations: tuple[ComponentMigration, ...]) -> None:
    """Migrate on a thread with its own loop and connection: the caller may be in a running loop."""

    async def migrate() -> None:
        from orchestrator.store.component_migrations import migrate_component
        from orchestrator.store.engine import Database

        database = Database(url)
        try:
            await migrate_component(database, component, migrations)
        finally:
            await database.close()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="folder-migrations") as pool:
        pool.submit(asyncio.run, migrate()).result()
