"""Each component owns its storage: a tool folder's `migrations/`, keyed by component and version."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from orchestrator.errors import ComponentMigrationError
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.store import Database, Storage
from orchestrator.store.component_migrations import migrate_component, read_migrations
from orchestrator.store.embedded import embedded_logins
from orchestrator.store.logins import Logins
from orchestrator.store.migrations import MIGRATIONS, upgrade
from orchestrator.testing import call_tools
from tests.tool_folders import copy_shipped, write_folder

NOTES_TOOL = '''
from pydantic import BaseModel
from sqlalchemy import text

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Nothing(BaseModel):
    pass


class Notes(Tool):
    @action(Nothing)
    async def count(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Count the user's notes."""
        database = self.context.require_database(self.name)
        async with database.user_transaction(request.user_id) as connection:
            count = await connection.scalar(text("SELECT count(*) FROM {table}"))
        return request.result(str(count))
'''


def notes_sql(table: str, *, extra: str = "") -> str:
    return (
        f"CREATE TABLE {table} (\n"
        "    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
        f"    user_id text NOT NULL,\n    body text NOT NULL{extra}\n);\n"
        f"SELECT orchestrator_protect('{table}');\n"
    )


def notes_folder(root: Path, name: str) -> Path:
    """A tool folder `name` whose migration makes the table `name`."""
    folder = write_folder(root, name, code=NOTES_TOOL.format(table=name))
    (folder / "migrations").mkdir()
    (folder / "migrations" / "001_notes.sql").write_text(notes_sql(name))
    return folder


def settings_for(tmp_path: Path, database_url: str, sub_graphs: Path) -> Settings:
    return load_settings(
        sub_graphs_dir=sub_graphs, data_dir=tmp_path / "data", database_url=database_url, embeddings="none"
    )


async def load(settings: Settings, *, ask: object, model: object = None) -> Orchestrator:
    """The runtime over `settings`' folders, opened on a storage that it closes again."""
    storage = await Storage.open(settings)
    try:
        runtime = Orchestrator.create(settings, ask=ask, storage=storage, **({"model": model} if model else {}))
        await runtime.close()
    finally:
        await storage.close()
    return runtime


def approve_all(folder: object, status: object) -> bool:
    return True


async def table_exists(database: Database, table: str) -> bool:
    async with database.admin_transaction() as connection:
        return await connection.scalar(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table})


async def recorded(database: Database, component: str) -> list[tuple[int, str, str]]:
    async with database.admin_transaction() as connection:
        rows = await connection.execute(
            text("SELECT version, description, checksum FROM schema_migrations WHERE component = :c"),
            {"c": component},
        )
        return [tuple(row) for row in rows]


# --- a folder's migration: run once approved, under forced row-level security ------------


async def test_a_folder_migration_makes_its_table_under_forced_row_level_security(
    tmp_path: Path, database_url: str, database: Database
):
    root = tmp_path / "sub_graphs"
    notes_folder(root, "notes")
    runtime = await load(settings_for(tmp_path, database_url, root), ask=approve_all)

    assert [loaded.folder.name for loaded in runtime.sub_agents] == ["notes"]
    [(version, name, checksum)] = await recorded(database, "notes")
    assert (version, name, len(checksum)) == (1, "notes", 64)
    async with database.admin_transaction() as connection:
        forced = (await connection.execute(text(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'notes'::regclass"
        ))).one()
    assert tuple(forced) == (True, True)
    async with database.user_transaction("ann") as connection:
        await connection.execute(text("INSERT INTO notes (user_id, body) VALUES ('ann', 'mine')"))
    async with database.user_transaction("ben") as connection:
        assert await connection.scalar(text("SELECT count(*) FROM notes")) == 0, "ann's row is not ben's"
        with pytest.raises(DBAPIError, match="row-level security"):
            await connection.execute(text("INSERT INTO notes (user_id, body) VALUES ('ann', 'forged')"))
    for undo in ("NO FORCE ROW LEVEL SECURITY", "DISABLE ROW LEVEL SECURITY"):
        with pytest.raises(DBAPIError, match="must be owner"):
            async with database.user_transaction("ben") as connection:
                await connection.execute(text(f"ALTER TABLE notes {undo}"))
    async with database.user_transaction("ann") as connection:
        assert await connection.scalar(text("SELECT count(*) FROM notes")) == 1


async def test_the_folder_tool_uses_its_table(
    tmp_path: Path, scripted, database_url: str, database: Database
):
    root = tmp_path / "sub_graphs"
    notes_folder(root, "jottings")
    settings = settings_for(tmp_path, database_url, root)
    model = scripted(call_tools(("jottings_count", {})), "none")
    storage = await Storage.open(settings)
    try:
        runtime = Orchestrator.create(settings, model=model, ask=approve_all, storage=storage)
        await runtime.session(user_id="cy").run("how many?")
        await runtime.close()
    finally:
        await storage.close()
    assert '"message": "0"' in model.received[1][-1].text


@pytest.mark.parametrize("ask", [lambda folder, status: False, lambda folder, status: None])
async def test_a_folder_migration_does_not_run_before_approval(
    tmp_path: Path, database_url: str, database: Database, ask: object
):
    name = f"unasked_{uuid.uuid4().hex[:8]}"
    root = tmp_path / "sub_graphs"
    notes_folder(root, name)
    runtime = await load(settings_for(tmp_path, database_url, root), ask=ask)

    assert runtime.sub_agents == []
    assert not await table_exists(database, name)
    assert await recorded(database, name) == []


async def test_a_changed_migration_is_asked_about_again_and_refused(
    tmp_path: Path, database_url: str, database: Database, caplog
):
    root = tmp_path / "sub_graphs"
    folder = notes_folder(root, "diary")
    settings = settings_for(tmp_path, database_url, root)
    await load(settings, ask=approve_all)
    before = await recorded(database, "diary")
    (folder / "migrations" / "001_notes.sql").write_text(notes_sql("diary", extra=",\n    mood text"))
    asked: list[tuple[str, str]] = []

    def ask(folder: object, status: object) -> bool:
        asked.append((folder.name, str(status)))
        return True

    with caplog.at_level(logging.WARNING):
        runtime = await load(settings, ask=ask)

    assert [name for name, _ in asked] == ["diary"], "a changed SQL file changes the folder: asked again"
    assert runtime.sub_agents == [], "approved again, but its changed migration is refused"
    assert "migrations/001_notes.sql was changed after it ran on this database" in caplog.text
    assert await recorded(database, "diary") == before
    async with database.admin_transaction() as connection:
        columns = await connection.scalar(text(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'diary' AND column_name = 'mood'"
        ))
    assert columns == 0, "the changed SQL did not run"


async def test_a_new_migration_file_runs_after_the_ones_that_ran(database: Database):
    first = {"migrations/001_make.sql": notes_sql("ledger").encode()}
    assert [m.version for m in await migrate_component(database, "ledger", read_migrations(first))] == [1]
    second = {**first, "migrations/002_more.sql": b"ALTER TABLE ledger ADD COLUMN amount numeric;"}
    assert [m.version for m in await migrate_component(database, "ledger", read_migrations(second))] == [2]
    assert await migrate_component(database, "ledger", read_migrations(second)) == []
    assert [row[:2] for row in await recorded(database, "ledger")] == [(1, "make"), (2, "more")]


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"migrations/notes.sql": b""}, "migrations/notes.sql: a migration is named NNN_name.sql"),
        ({"migrations/001_a.sql": b"", "migrations/001_b.sql": b""}, "have the same version number"),
        ({"migrations/001_a.sql": b"\xff"}, "migrations/001_a.sql is not UTF-8 text"),
    ],
)
def test_a_badly_named_migration_is_one_clear_line(files: dict[str, bytes], problem: str):
    with pytest.raises(ComponentMigrationError, match=problem):
        read_migrations(files)


async def test_failing_sql_leaves_nothing_behind(database: Database):
    broken = {"migrations/001_broken.sql": b"CREATE TABLE half (user_id text); SELECT nonsense();"}
    with pytest.raises(ComponentMigrationError, match="migrations/001_broken.sql failed: .*nonsense"):
        await migrate_component(database, "broken", read_migrations(broken))
    assert not await table_exists(database, "half")
    assert await recorded(database, "broken") == []


async def test_protect_wants_a_user_id_column(database: Database):
    files = {"migrations/001_x.sql": b"CREATE TABLE nobody (id int); SELECT orchestrator_protect('nobody');"}
    with pytest.raises(ComponentMigrationError, match="has no user_id column"):
        await migrate_component(database, "nobody", read_migrations(files))


# --- the shipped task list keeps a user's tasks across the move into its folder ----------


@pytest.fixture
def databases(embedded_dir: Path, postgres_url: str) -> Iterator[Callable[[], Logins]]:
    """Makes empty databases on the run's server; drops them afterwards."""
    names: list[str] = []

    def make() -> Logins:
        names.append(f"test_{uuid.uuid4().hex[:12]}")
        return embedded_logins(embedded_dir, database=names[-1])

    yield make
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for name in names:
            connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


# Core migration 1 as released until issue 43: it made the to-do list's `tasks` table.
RELEASED_MIGRATION_1 = Path(__file__).resolve().parents[1] / "data/core_migration_001_as_released.sql"


@pytest.fixture(params=[7, len(MIGRATIONS)], ids=["before-folder-migrations", "all-core-migrations-of-before"])
def old_database(request: pytest.FixtureRequest, databases: Callable[[], Logins]) -> Logins:
    """A database as an earlier version left it, and a task of lena's: core migrations 1-7
    (before folders had migrations), or every core migration (before `tasks` left the core),
    migration 1 as it was released."""
    logins = databases()
    released = RELEASED_MIGRATION_1.read_text(encoding="utf-8")
    with psycopg.connect(logins.owner_url) as connection:
        connection.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
                           "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        for migration in MIGRATIONS[: request.param]:
            connection.execute(released if migration.version == 1 else migration.sql)
            connection.execute("INSERT INTO schema_migrations (version, description) VALUES (%s, %s)",
                               (migration.version, migration.description))
        connection.execute("INSERT INTO tasks (user_id, task_id, title) VALUES ('lena', 1, 'Water the plants')")
    return logins


async def test_the_task_list_keeps_a_users_tasks_across_the_move(tmp_path: Path, scripted, old_database: Logins):
    settings = load_settings(
        sub_graphs_dir=copy_shipped(tmp_path),
        data_dir=tmp_path / "data",
        database_url=old_database.owner_url,
        database_app_url=old_database.app_url,
        embeddings="none",
    )
    model = scripted(
        call_tools(("personal_assistant_agent_ask", {"request": "What is on my list?"})),
        call_tools(("task_agent_list", {})),
        "Water the plants.",
        "You have one task: water the plants.",
    )
    storage = await Storage.open(settings)
    try:
        runtime = Orchestrator.create(settings, model=model, ask=approve_all, storage=storage)
        await runtime.session(user_id="lena").run("What is on my list?")
        await runtime.close()
        task_agent = "personal_assistant_agent/src/sub_graphs/task_agent"
        assert [row[:2] for row in await recorded(storage.database, task_agent)] == [(1, "tasks")]
    finally:
        await storage.close()

    listed = model.received[2][-1]
    assert listed.name == "task_agent_list" and "#1 Water the plants" in listed.text


def test_the_folders_migration_makes_the_table_core_migration_1_made(
    old_database: Logins, databases: Callable[[], Logins]
):
    """Old databases (the table from core migration 1 as released) and new ones (only the folder makes it) end the same."""
    shipped = Path(__file__).resolve().parents[2] / "sub_graphs/personal_assistant_agent/src/sub_graphs/task_agent"
    files = {"migrations/001_tasks.sql": (shipped / "migrations/001_tasks.sql").read_bytes()}

    def shape(logins: Logins) -> tuple[object, ...]:
        async def upgraded() -> None:
            database = Database(logins.owner_url, app_url=logins.app_url)
            try:
                await migrate_component(database, "task_agent", read_migrations(files))
            finally:
                await database.close()

        asyncio.run(upgraded())
        with psycopg.connect(logins.owner_url) as connection:
            return (
                connection.execute(
                    "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
                    "WHERE table_name = 'tasks' ORDER BY ordinal_position"
                ).fetchall(),
                connection.execute(
                    "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'tasks'::regclass"
                ).fetchall(),
                connection.execute("SELECT policyname, qual, with_check FROM pg_policies WHERE tablename = 'tasks'")
                .fetchall(),
                connection.execute(
                    "SELECT privilege_type FROM information_schema.role_table_grants "
                    "WHERE table_name = 'tasks' AND grantee = 'orchestrator_app' ORDER BY 1"
                ).fetchall(),
            )

    made_by_the_folder = databases()
    asyncio.run(_migrated(made_by_the_folder))
    with psycopg.connect(made_by_the_folder.owner_url) as connection:
        made = connection.execute("SELECT to_regclass('tasks')").fetchone()
    assert made == (None,), "a new database's core migrations leave `tasks` to the folder"

    old, new = shape(old_database), shape(made_by_the_folder)
    assert old == new
    assert old[1] == [(True, True)] and len(old[2]) == 1 and old[3], "protected, one policy, granted"


async def _migrated(logins: Logins) -> None:
    database = Database(logins.owner_url, app_url=logins.app_url)
    try:
        await upgrade(database)
    finally:
        await database.close()


# --- the schema is declared once: the code's columns are the migrated database's ---------


async def test_the_codes_tables_are_the_migrated_databases(database: Database):
    from orchestrator.store.models import metadata

    async with database.admin_transaction() as connection:
        rows = await connection.execute(
            text("SELECT table_name, column_name FROM information_schema.columns "
                 "WHERE table_schema = 'public' AND table_name = ANY(:t)"),
            {"t": list(metadata.tables)},
        )
        in_database = {(row[0], row[1]) for row in rows}
    in_code = {
        (table.name, column.name)
        for table in metadata.tables.values()
        for column in table.columns
    }
    assert in_code == in_database
