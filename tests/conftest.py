"""Shared fixtures: no real model or network, a clean environment, scripted models."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from orchestrator.store.embedded import create_database, embedded_database_url
from orchestrator.store.engine import Database
from orchestrator.store.migrations import upgrade

from orchestrator.testing import ScriptedChatModel, block_remote_connections
from orchestrator.testing.scripted import Step
from tests.helpers import run_cli


@pytest.fixture(autouse=True)
def no_real_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Block every non-local connection; hide the developer's settings, `.env` and data."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ORCHESTRATOR_", "ANTHROPIC_", "EMAIL_AGENT_", "DATABASE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORCHESTRATOR_HOME", str(tmp_path))  # .env, data/, sub_graphs/ of this test
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user-data"))  # the user's data directory
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


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The embedded PostgreSQL for the whole run: the admin URL of its `postgres` database."""
    return embedded_database_url(tmp_path_factory.mktemp("postgres"), database="postgres")


@pytest.fixture(scope="module")
def database_url(postgres_url: str) -> Iterator[str]:
    """A fresh, migrated database for one test module, dropped afterwards."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    create_database(postgres_url, name)
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_migrate(url))
    yield url
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def _migrate(url: str) -> None:
    database = Database.embedded(url)
    try:
        await upgrade(database)
    finally:
        await database.close()


@pytest.fixture
async def database(database_url: str) -> Database:
    """The module's database, with a pool for this test's event loop."""
    database = Database.embedded(database_url)
    yield database
    await database.close()


@pytest.fixture
def cli(database_url: str) -> Callable[..., object]:
    """`run_cli` against the module's database, without the local embedding model."""
    env = {"DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none"}

    def run(*args: str, env_extra: dict[str, str] | None = None, **options: object) -> object:
        return run_cli(*args, env={**env, **(env_extra or {})}, **options)  # type: ignore[arg-type]

    return run
