"""The core schema, as an ordered list of migrations recorded in `schema_migrations`.

`schema_migrations` is keyed by component and version: this module's migrations
are the component `core`; a tool folder's own (`migrations/NNN_name.sql`, see
`component_migrations`) are recorded under the folder's key. A migration is
never edited once released: a change is a new entry at the end. `upgrade`
applies what is missing under an advisory lock, so processes that start
together do not race.

The migrations are the schema's DDL, its history; `models` says which columns
the code queries (see there).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.engine import (
    APP_ROLE,
    TOKEN_SETTING,
    TRANSACTION_TOKEN_SETTING,
    USER_SETTING,
    Database,
)

EMBEDDING_DIMENSIONS = 384  # all-MiniLM-L6-v2; `orchestrator db reembed` changes it
LOCK_KEY = "orchestrator.schema"
CORE = "core"  # the component this module's migrations are recorded under
# The component of a row of `schema_migrations`, whether or not migration 8 gave the table
# its `component` column yet (before it, every row is core's).
_COMPONENT = "coalesce(to_jsonb(m) ->> 'component', 'core')"
# Every table with a user_id, all under row-level security.
USER_TABLES = ("sessions", "messages", "requests", "tasks", "request_events", "request_usage")
# The tables migration 4 found; later tables get the verified policy as they are made.
_TABLES_OF_MIGRATION_4 = ("sessions", "messages", "requests", "tasks", "request_events")
# Full text indexes this much of a message: a tsvector holds at most 1 MB of
# lexemes, which 100,000 characters cannot exceed (4 bytes a character at most).
SEARCH_PREFIX_CHARS = 100_000
SEARCH = f"to_tsvector('english', left(content, {SEARCH_PREFIX_CHARS}))"


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


def _isolate(table: str, *, verified: bool = False) -> tuple[str, ...]:
    """Row-level security on a table with a user_id: even its owner sees only the current user.

    `verified`: the user is the one `orchestrator_auth.enter` checked (migration 4 on).
    """
    if verified:
        mine = "user_id = (SELECT orchestrator_auth.verified_user())"
    else:
        mine = f"user_id = current_setting('{USER_SETTING}', true)"
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY {table}_of_user ON {table} USING ({mine}) WITH CHECK ({mine})",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {APP_ROLE}",
    )


def _search_prefix() -> tuple[str, ...]:
    """The `search` column over a bounded prefix; in place where the server can (PostgreSQL 17)."""
    replace = (
        "ALTER TABLE messages DROP COLUMN search",
        f"ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS ({SEARCH}) STORED",
        "CREATE INDEX messages_search ON messages USING gin (search)",
    )
    in_place = f"ALTER TABLE messages ALTER COLUMN search SET EXPRESSION AS ({SEARCH})"
    return (
        f"""DO $$ BEGIN
            IF current_setting('server_version_num')::int >= 170000 THEN
                EXECUTE {_literal(in_place)};
            ELSE
                {" ".join(f"EXECUTE {_literal(statement)};" for statement in replace)}
            END IF;
        END $$""",
    )


def _literal(statement: str) -> str:
    return "'" + statement.replace("'", "''") + "'"


# The user a transaction acts for is the one `orchestrator_auth.enter` was given a valid token
# for: HMAC-SHA256 of the id under `orchestrator_auth.secret.key`, which only the owner reads.
# The policies ask `orchestrator_auth.verified_user()` once per statement (an InitPlan), which
# checks the token again: setting app.user_id by hand afterwards only blinds.
# The key is 64 bytes, SHA-256's block size, so the pads are key XOR 0x36 / 0x5c.
USER_TOKENS = (
    "CREATE SCHEMA orchestrator_auth",
    "REVOKE ALL ON SCHEMA orchestrator_auth FROM PUBLIC",
    f"GRANT USAGE ON SCHEMA orchestrator_auth TO {APP_ROLE}",
    """CREATE TABLE orchestrator_auth.secret (
        single boolean PRIMARY KEY DEFAULT true CHECK (single),
        key bytea NOT NULL,
        inner_pad bytea NOT NULL,
        outer_pad bytea NOT NULL
    )""",
    """DO $$ DECLARE
        key bytea := sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'))
            || sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'));
        inner_pad bytea := key;
        outer_pad bytea := key;
    BEGIN
        FOR i IN 0..63 LOOP
            inner_pad := set_byte(inner_pad, i, get_byte(key, i) # 54);
            outer_pad := set_byte(outer_pad, i, get_byte(key, i) # 92);
        END LOOP;
        INSERT INTO orchestrator_auth.secret (key, inner_pad, outer_pad) VALUES (key, inner_pad, outer_pad);
    END $$""",
    f"""CREATE FUNCTION orchestrator_auth.verified_user() RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$
            SELECT current_setting('{USER_SETTING}', true) FROM orchestrator_auth.secret
            WHERE current_setting('{TOKEN_SETTING}', true) = encode(sha256(outer_pad || sha256(
                inner_pad || convert_to(current_setting('{USER_SETTING}', true), 'UTF8'))), 'hex')
        $$""",
    f"""CREATE FUNCTION orchestrator_auth.enter(user_id text, token text) RETURNS void
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$ BEGIN
            PERFORM set_config('{USER_SETTING}', user_id, true);
            PERFORM set_config('{TOKEN_SETTING}', token, true);
            IF orchestrator_auth.verified_user() IS DISTINCT FROM user_id THEN
                RAISE EXCEPTION 'not a valid token for this user' USING ERRCODE = 'insufficient_privilege';
            END IF;
        END $$""",
    "REVOKE ALL ON FUNCTION orchestrator_auth.verified_user(), orchestrator_auth.enter(text, text) FROM PUBLIC",
    f"GRANT EXECUTE ON FUNCTION orchestrator_auth.verified_user(), orchestrator_auth.enter(text, text) TO {APP_ROLE}",
    *(
        f"ALTER POLICY {table}_of_user ON {table} "
        "USING (user_id = (SELECT orchestrator_auth.verified_user())) "
        "WITH CHECK (user_id = (SELECT orchestrator_auth.verified_user()))"
        for table in _TABLES_OF_MIGRATION_4
    ),
)


def _hmac(message: str) -> str:
    """SQL for the hex HMAC-SHA256 of the bytea `message`, in a query over the secret."""
    return f"encode(sha256(outer_pad || sha256(inner_pad || {message})), 'hex')"


def _bound(user_id: str) -> str:
    """SQL for what binds `user_id` to this transaction on this backend.

    The backend's pid and the transaction's start (microseconds since the epoch,
    whatever TimeZone says) come first: they hold no '/', so no user id can make
    another's bytes.
    """
    started = "floor(extract(epoch FROM transaction_timestamp()) * 1000000)::bigint"
    return f"convert_to(pg_backend_pid() || '/' || {started} || '/' || {user_id}, 'UTF8')"


# The token of migration 4 is fixed per user and sat in app.user_token, where any SQL
# of the transaction could read it and later enter that user from any transaction.
# Now `enter` checks it and keeps only an HMAC of the user bound to this transaction
# and backend, which opens nothing elsewhere; the token itself is in no setting.
TRANSACTION_TOKENS = (
    f"""CREATE OR REPLACE FUNCTION orchestrator_auth.verified_user() RETURNS text
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$
            SELECT current_setting('{USER_SETTING}', true) FROM orchestrator_auth.secret
            WHERE current_setting('{TRANSACTION_TOKEN_SETTING}', true)
                = {_hmac(_bound(f"current_setting('{USER_SETTING}', true)"))}
        $$""",
    f"""CREATE OR REPLACE FUNCTION orchestrator_auth.enter(user_id text, token text) RETURNS void
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
        AS $$ DECLARE bound text; BEGIN
            SELECT {_hmac(_bound("user_id"))} INTO bound FROM orchestrator_auth.secret
            WHERE token = {_hmac("convert_to(user_id, 'UTF8')")};
            IF bound IS NULL THEN
                RAISE EXCEPTION 'not a valid token for this user' USING ERRCODE = 'insufficient_privilege';
            END IF;
            PERFORM set_config('{USER_SETTING}', user_id, true);
            PERFORM set_config('{TRANSACTION_TOKEN_SETTING}', bound, true);
        END $$""",
)


# A tool folder's tables get the core tables' protection from one call in its migration:
# `SELECT orchestrator_protect('my_table');` on a table with a text `user_id` column.
PROTECT = (
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS component text NOT NULL DEFAULT 'core'",
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text",
    "ALTER TABLE schema_migrations DROP CONSTRAINT schema_migrations_pkey",
    "ALTER TABLE schema_migrations ADD PRIMARY KEY (component, version)",
    f"""CREATE FUNCTION orchestrator_protect(target regclass) RETURNS void
        LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
        AS $$ DECLARE
            policy text := (SELECT relname FROM pg_class WHERE oid = target) || '_of_user';
            mine text := 'user_id = (SELECT orchestrator_auth.verified_user())';
        BEGIN
            IF NOT EXISTS (
                SELECT FROM pg_attribute
                WHERE attrelid = target AND attname = 'user_id' AND NOT attisdropped
            ) THEN
                RAISE EXCEPTION '% has no user_id column, which its row-level security needs', target;
            END IF;
            EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', target);
            EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', target);
            IF NOT EXISTS (SELECT FROM pg_policy WHERE polrelid = target AND polname = policy) THEN
                EXECUTE format('CREATE POLICY %I ON %s USING (%s) WITH CHECK (%s)', policy, target, mine, mine);
            END IF;
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO {APP_ROLE}', target);
        END $$""",
    "REVOKE ALL ON FUNCTION orchestrator_protect(regclass) FROM PUBLIC",
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
    Migration(3, "full-text search over the first 100,000 characters of a message", _search_prefix()),
    Migration(4, "a user is entered with a token only the application can make", USER_TOKENS),
    Migration(
        5,
        "the token is checked on entering; only a value bound to the transaction stays",
        TRANSACTION_TOKENS,
    ),
    Migration(
        6,
        "tokens and cost of each model call and billed tool call",
        (
            """CREATE TABLE request_usage (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                request_id text NOT NULL,
                parent_request_id text,
                session_id text,
                user_id text NOT NULL,
                turn_id text,
                kind text NOT NULL CHECK (kind IN ('model', 'tool')),
                name text NOT NULL,
                input_tokens bigint NOT NULL DEFAULT 0,
                output_tokens bigint NOT NULL DEFAULT 0,
                cached_input_tokens bigint NOT NULL DEFAULT 0,
                cache_write_tokens bigint NOT NULL DEFAULT 0,
                reasoning_tokens bigint NOT NULL DEFAULT 0,
                cost_usd double precision,
                credits double precision,
                seconds double precision NOT NULL DEFAULT 0,
                created_at timestamptz NOT NULL DEFAULT now()
            )""",
            "COMMENT ON COLUMN request_usage.cost_usd IS 'NULL: no price is known for the model'",
            "CREATE INDEX request_usage_by_user ON request_usage (user_id, created_at)",
            "CREATE INDEX request_usage_by_session ON request_usage (session_id)",
            *_isolate("request_usage", verified=True),
        ),
    ),
    Migration(
        7,
        "the model's tool calls are found by text search only, not embedded",
        (
            "DROP INDEX messages_to_embed",
            """CREATE INDEX messages_to_embed ON messages (id)
                WHERE embedding IS NULL AND role IN ('user', 'assistant')
                    AND NOT (role = 'assistant' AND content LIKE 'calls [%')""",
            """UPDATE messages SET embedding = NULL, embedding_model = NULL
                WHERE role = 'assistant' AND content LIKE 'calls [%'""",
        ),
    ),
    Migration(
        8,
        "migrations keyed by component; orchestrator_protect() for the tables of tool folders",
        PROTECT,
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
    if not (await schema_status(database)).pending:  # every start: one short transaction
        return []
    applied = []
    for migration in MIGRATIONS:
        async with database.admin_transaction() as connection:
            await lock(connection)
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
