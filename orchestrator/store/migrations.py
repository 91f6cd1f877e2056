"""The schema, as an ordered list of migrations recorded in `schema_migrations`.

A migration is never edited once released: a change is a new entry at the end.
`upgrade` applies what is missing under an advisory lock, so processes that
start together do not race.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.engine import APP_ROLE, USER_SETTING, Database

EMBEDDING_DIMENSIONS = 384  # all-MiniLM-L6-v2; `orchestrator db reembed` changes it
LOCK_KEY = "orchestrator.schema"
# Every table with a user_id, all under row-level security.
USER_TABLES = ("sessions", "messages", "requests", "tasks", "request_events")


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


def _isolate(table: str) -> tuple[str, ...]:
    """Row-level security on a table with a user_id: even its owner sees only the current user."""
    mine = f"user_id = current_setting('{USER_SETTING}', true)"
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY {table}_of_user ON {table} USING ({mine}) WITH CHECK ({mine})",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}",
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions, messages with embeddings and full text, requests, tasks; row-level security",
        (
            "CREATE EXTENSION IF NOT EXISTS vector",
            f"""DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
                    CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB;
                END IF;
            END $$""",
            f"GRANT {APP_ROLE} TO CURRENT_USER",
            f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}",
            """CREATE TABLE sessions (
                session_id text PRIMARY KEY,
                user_id text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now()
            )""",
            f"""CREATE TABLE messages (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                message_id text NOT NULL UNIQUE,
                session_id text NOT NULL REFERENCES sessions ON DELETE CASCADE,
                user_id text NOT NULL,
                role text NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
                content text NOT NULL,
                tool_name text,
                request_id text,
                created_at timestamptz NOT NULL DEFAULT now(),
                search tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
                embedding vector({EMBEDDING_DIMENSIONS}),
                embedding_model text
            )""",
            "CREATE INDEX messages_by_user ON messages (user_id, session_id, id)",
            "CREATE INDEX messages_search ON messages USING gin (search)",
            "CREATE INDEX messages_embedding ON messages USING hnsw (embedding vector_cosine_ops)",
            """CREATE INDEX messages_to_embed ON messages (id)
                WHERE embedding IS NULL AND role IN ('user', 'assistant')""",
            """CREATE TABLE requests (
                request_id text PRIMARY KEY,
                parent_request_id text,
                session_id text,
                user_id text NOT NULL,
                tool text NOT NULL,
                action text,
                parameters jsonb NOT NULL DEFAULT '{}',
                status text NOT NULL,
                result jsonb,
                error jsonb,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now()
            )""",
            "CREATE INDEX requests_by_parent ON requests (parent_request_id)",
            """CREATE TABLE tasks (
                user_id text NOT NULL,
                task_id integer NOT NULL,
                title text NOT NULL,
                due date,
                done boolean NOT NULL DEFAULT false,
                created_at timestamptz NOT NULL DEFAULT now(),
                completed_at timestamptz,
                PRIMARY KEY (user_id, task_id)
            )""",
            *(
                statement
                for table in ("sessions", "messages", "requests", "tasks")
                for statement in _isolate(table)
            ),
        ),
    ),
    Migration(
        2,
        "request lifecycle: outcome, closing, owning process, and an audit log of status changes",
        (
            """ALTER TABLE requests
                ADD COLUMN outcome text,
                ADD COLUMN call_name text,
                ADD COLUMN background boolean NOT NULL DEFAULT false,
                ADD COLUMN idempotent boolean NOT NULL DEFAULT false,
                ADD COLUMN owner text,
                ADD COLUMN closed_at timestamptz""",
            "CREATE INDEX requests_open ON requests (user_id, status) WHERE status <> 'closed'",
            """CREATE TABLE request_events (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                request_id text NOT NULL,
                user_id text NOT NULL,
                status text NOT NULL,
                detail text,
                at timestamptz NOT NULL DEFAULT now()
            )""",
            "CREATE INDEX request_events_by_request ON request_events (request_id, id)",
            *_isolate("request_events"),
        ),
    ),
)


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
    applied = []
    for migration in MIGRATIONS:
        async with database.admin_transaction() as connection:
            await _lock(connection)
            if migration.version in await _applied_versions(connection):
                continue  # up to date, or another process got there first
            for statement in migration.statements:
                await connection.execute(text(statement))
            await connection.execute(
                text("INSERT INTO schema_migrations (version, description) VALUES (:v, :d)"),
                {"v": migration.version, "d": migration.description},
            )
            applied.append(migration)
    return applied


async def schema_status(database: Database) -> SchemaStatus:
    """The applied and pending migrations."""
    async with database.admin_transaction() as connection:
        await _ensure_version_table(connection)
        rows = (
            await connection.execute(
                text("SELECT version, description, applied_at FROM schema_migrations ORDER BY version")
            )
        ).all()
    done = {row[0] for row in rows}
    return SchemaStatus(
        applied=[(row[0], row[1], row[2]) for row in rows],
        pending=[m for m in MIGRATIONS if m.version not in done],
    )


async def _lock(connection: AsyncConnection) -> None:
    await connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": LOCK_KEY})
    await _ensure_version_table(connection)


async def _ensure_version_table(connection: AsyncConnection) -> None:
    await connection.execute(
        text(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )"""
        )
    )


async def _applied_versions(connection: AsyncConnection) -> set[int]:
    rows = await connection.execute(text("SELECT version FROM schema_migrations"))
    return {row[0] for row in rows}
