"""One PostgreSQL database, reached through SQLAlchemy (async, psycopg 3).

Everything a user can see runs in `user_transaction`: logged in as the
application role (no superuser, no BYPASSRLS) with the user named for the
transaction, so PostgreSQL's row-level security, not only a WHERE clause,
keeps users apart. Schema changes and maintenance (embedding every user's
messages) run in `admin_transaction` as the admin login, which must own the
schema and bypass row-level security (the embedded server's superuser does).

The embedded server lets the application role log in over its socket. For an
external server, `DATABASE_APP_URL` names that login; without it, user
transactions run on the admin login switched to the role with SET ROLE, which
SQL run in the transaction could switch back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from orchestrator.errors import ConfigError, UserError
from orchestrator.settings import Settings
from orchestrator.store.embedded import embedded_database_url

APP_ROLE = "orchestrator_app"
# libpq waits 130 s by default for a server that does not answer: say so sooner.
CONNECT_ARGS = {"connect_timeout": 10}
USER_SETTING = "app.user_id"


class DatabaseUnavailableError(UserError):
    """The database cannot be reached or refused us."""


class Database:
    """A database, with a pool of admin connections and one of application connections."""

    def __init__(self, url: str, *, app_url: str | None = None) -> None:
        self.url = _psycopg_url(url)
        self.engine: AsyncEngine = _engine(self.url, pool_size=2, max_overflow=8)
        self.app_engine: AsyncEngine = (
            _engine(_psycopg_url(app_url), pool_size=5, max_overflow=10) if app_url else self.engine
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        """`DATABASE_URL` if set, else the embedded server under the data directory."""
        if settings.database_url:
            return cls(settings.database_url, app_url=settings.database_app_url)
        return cls.embedded(embedded_database_url(settings.data_dir))

    @classmethod
    def embedded(cls, url: str) -> Database:
        """A database of the embedded server, where the application role logs in itself."""
        app_url = make_url(url).set(username=APP_ROLE, password=None)
        return cls(url, app_url=app_url.render_as_string(hide_password=False))

    @property
    def libpq_url(self) -> str:
        """The same database as a plain `postgresql://` URL, for psycopg itself."""
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    @property
    def where(self) -> str:
        """Where the database is, for messages (no password)."""
        host = self.url.host or self.url.query.get("host") or "localhost"
        return f"{host}/{self.url.database}"

    @asynccontextmanager
    async def user_transaction(self, user_id: str) -> AsyncIterator[AsyncConnection]:
        """A transaction that sees and writes only `user_id`'s rows."""
        async with self._begin(self.app_engine) as connection:
            await connection.execute(text(f"SET LOCAL ROLE {APP_ROLE}"))
            await connection.execute(
                text("SELECT set_config(:setting, :user_id, true)"),
                {"setting": USER_SETTING, "user_id": user_id},
            )
            yield connection

    @asynccontextmanager
    async def admin_transaction(self) -> AsyncIterator[AsyncConnection]:
        """A transaction as the admin login: schema and maintenance only."""
        async with self._begin(self.engine) as connection:
            yield connection

    async def close(self) -> None:
        await self.engine.dispose()
        if self.app_engine is not self.engine:
            await self.app_engine.dispose()

    @asynccontextmanager
    async def _begin(self, engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
        connection = engine.connect()
        try:
            await connection.start()
        except (DBAPIError, OSError) as error:
            raise DatabaseUnavailableError(
                f"Cannot connect to the database at {self.where}: {_first_line(error)}; "
                "check DATABASE_URL (unset it to use the embedded server)"
            ) from None
        try:
            async with connection.begin():
                yield connection
        finally:
            await connection.close()


def _engine(url: URL, *, pool_size: int, max_overflow: int) -> AsyncEngine:
    return create_async_engine(
        url, pool_size=pool_size, max_overflow=max_overflow, connect_args=CONNECT_ARGS
    )


def _psycopg_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(f"DATABASE_URL is not a database URL: {url!r}") from None
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise ConfigError(f"DATABASE_URL must be a postgresql:// URL, not {parsed.drivername}://")
    return parsed.set(drivername="postgresql+psycopg")


def _first_line(error: BaseException) -> str:
    detail = str(getattr(error, "orig", None) or error).strip()
    return detail.splitlines()[0] if detail else type(error).__name__
