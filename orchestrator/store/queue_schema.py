"""The job queue's tables: a component of their own (`jobs`), with migrations in `queue_schema/`.

The first is procrastinate's schema of the pinned version, in the PostgreSQL
schema `job_queue`, which only the owner login reaches (the application role
has no USAGE on it): a job's arguments and the queue's state are nothing SQL in
a user's transaction can read. `upgrade_all` brings the core schema and this
one up to date, at every start and with `orchestrator db upgrade`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from orchestrator.store.component_migrations import (
    ComponentMigration,
    migrate_component,
    read_migrations,
)
from orchestrator.store.engine import Database
from orchestrator.store.migrations import CORE, MIGRATIONS, applied_migrations, upgrade

COMPONENT = "jobs"  # its migrations' key in schema_migrations
SCHEMA = "job_queue"  # the PostgreSQL schema its tables and functions live in
SCHEMA_DIR = Path(__file__).with_name("queue_schema")


@cache
def queue_migrations() -> tuple[ComponentMigration, ...]:
    """The queue's migrations, in order (read once)."""
    return read_migrations({path.name: path.read_bytes() for path in SCHEMA_DIR.glob("*.sql")})


async def upgrade_all(database: Database) -> list[str]:
    """Apply what the core schema and the queue's lack; a line for each migration applied.

    When nothing is pending this costs one short transaction, as at every start.
    """
    applied = await applied_migrations(database)
    done: list[str] = []
    if any(m.version not in applied.get(CORE, set()) for m in MIGRATIONS):
        done += [f"{m.version} ({m.description})" for m in await upgrade(database)]
    if any(m.version not in applied.get(COMPONENT, set()) for m in queue_migrations()):
        queued = await migrate_component(database, COMPONENT, queue_migrations())
        done += [f"{COMPONENT} {m.version} ({m.name.replace('_', ' ')})" for m in queued]
    return done
