"""The job queue's schema: applied by our migrations, out of reach of the application role."""

from __future__ import annotations

from importlib import resources

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from orchestrator.store import Database
from orchestrator.store.queue_schema import COMPONENT, SCHEMA_DIR, queue_migrations, upgrade_all


def test_the_first_migration_is_procrastinates_schema_of_the_pinned_version_unchanged():
    ours = (SCHEMA_DIR / "001_procrastinate_3_10_0.sql").read_text()
    theirs = (resources.files("procrastinate.sql") / "schema.sql").read_text()

    assert theirs in ours, "a new procrastinate version needs its migrations here as new files"


async def test_every_start_finds_the_queue_schema_applied(database: Database):
    assert await upgrade_all(database) == []
    async with database.admin_transaction() as connection:
        versions = (
            await connection.execute(
                text("SELECT version FROM schema_migrations WHERE component = :c ORDER BY version"),
                {"c": COMPONENT},
            )
        ).scalars().all()
        tables = (
            await connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'job_queue' ORDER BY 1")
            )
        ).scalars().all()

    assert versions == [m.version for m in queue_migrations()]
    assert {"procrastinate_jobs", "procrastinate_workers", "approved_folders", "worker_processes"} <= set(tables)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT count(*) FROM job_queue.procrastinate_jobs",
        "SELECT count(*) FROM job_queue.approved_folders",
        "SELECT job_queue.procrastinate_register_worker_v1()",
        "INSERT INTO job_queue.approved_folders VALUES ('k', 'd', 'n', '1', true, now(), 'me')",
    ],
)
async def test_a_users_transaction_cannot_reach_the_queue(database: Database, statement: str):
    with pytest.raises(ProgrammingError, match="permission denied for schema job_queue"):
        async with database.user_transaction("mallory") as connection:
            await connection.execute(text(statement))
