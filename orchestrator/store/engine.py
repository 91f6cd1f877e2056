"""One PostgreSQL database, reached through SQLAlchemy (async, psycopg 3).

Everything a user can see runs in `user_transaction`: as the application role
(no superuser, no BYPASSRLS), entered for one user with a token only this
process can make (an HMAC of the user id under a key only the owner role can
read), so PostgreSQL's row-level security, not only a WHERE clause, keeps users
apart, and SQL run in the transaction cannot switch to another user. The token
goes to the server as a parameter and stays in no setting: what the transaction
keeps is bound to it, so nothing SQL reads there opens another transaction. Schema
changes and maintenance (embedding every user's messages) run in
`admin_transaction` as the owner login, which must own the schema and bypass
row-level security.

The embedded server has a login for each (see `logins`). For an external
server, `DATABASE_APP_URL` names the application's login; without it, user
transactions run on the owner's login switched to the role with SET ROLE,
which SQL run in the transaction could switch back.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Final, LiteralString, cast

import psycopg
from psycopg.errors import QueryCanceled
from psycopg_pool import PoolTimeout
from sqlalchemy import ClauseElement, event, text
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from orchestrator.errors import ConfigError, DatabaseUnavailableError
from orchestrator.settings import Settings, hide_passwords
from orchestrator.store.embedded import embedded_logins, first_line, revive_embedded_server
from orchestrator.store.logins import APP_ROLE
from orchestrator.store.pool import CONNECT_ARGS, ServerPool, dropped

USER_SETTING = "app.user_id"
TOKEN_SETTING = "app.user_token"  # migration 4's; no longer set
# What `orchestrator_auth.enter` leaves for the transaction: bound to it, useless in any other.
TRANSACTION_TOKEN_SETTING = "app.transaction_token"
# One statement per transaction: the role, and the user with its token (for SQLAlchemy, and
# for psycopg itself in `user_pipeline`).
_ENTER: Final = "SELECT set_config('role', '{role}', true), orchestrator_auth.enter({user}, {token})"
ENTER = text(_ENTER.format(role=APP_ROLE, user=":user_id", token=":token"))
ENTER_SQL: LiteralString = _ENTER.format(role=APP_ROLE, user="%s", token="%s")
# For a transaction whose commit need not wait for the WAL to reach the disk.
NOT_DURABLE: Final = "set_config('synchronous_commit', 'off', true)"
ENTER_NOT_DURABLE_SQL: LiteralString = f"{ENTER_SQL}, {NOT_DURABLE}"
UNAVAILABLE = "The database{at} is unavailable: {detail}"


class Database:
    """A database, with a pool of owner connections and one of application connections."""

    def __init__(
        self,
        url: str,
        *,
        app_url: str | None = None,
        revive: Callable[[], bool] | None = None,
    ) -> None:
        """`revive` starts a server that died again (the embedded one); whether it did."""
        self.url = _psycopg_url(url)
        self.engine: AsyncEngine = _engine(self.url, pool_size=2, max_overflow=8)
        self.app_engine: AsyncEngine = (
            _engine(_psycopg_url(app_url), pool_size=5, max_overflow=10) if app_url else self.engine
        )
        self._revive = revive
        self._key: bytes | None = None
        self._pipelines: dict[AsyncEngine, ServerPool] = {}  # psycopg's, per login: opened on first use
        self._opening = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        """`DATABASE_URL` if set, else the embedded server under the data directory."""
        if settings.database_url:
            return cls(settings.database_url, app_url=settings.database_app_url)
        logins = embedded_logins(settings.data_dir, idle_minutes=settings.db_idle_minutes)
        revive = partial(revive_embedded_server, settings.data_dir)
        return cls(logins.owner_url, app_url=logins.app_url, revive=revive)

    @property
    def libpq_url(self) -> str:
        """The same database as a plain `postgresql://` URL, for psycopg itself."""
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    @property
    def app_libpq_url(self) -> str:
        """The application's login as a plain `postgresql://` URL, for psycopg itself."""
        url = self.app_engine.url.set(drivername="postgresql")
        return url.render_as_string(hide_password=False)

    @property
    def where(self) -> str:
        """Where the database is, for messages (no password)."""
        host = self.url.host or self.url.query.get("host") or "localhost"
        return f"{host}/{self.url.database}"

    @asynccontextmanager
    async def user_transaction(self, user_id: str) -> AsyncGenerator[AsyncConnection, None]:
        """A transaction that sees and writes only `user_id`'s rows."""
        token = await self.user_token(user_id)
        async with self._begin(self.app_engine) as connection:
            await connection.execute(ENTER, {"user_id": user_id, "token": token})
            yield connection

    @asynccontextmanager
    async def user_pipeline(
        self, user_id: str, *, durable: bool = True
    ) -> AsyncGenerator[psycopg.AsyncConnection, None]:
        """`user_transaction` in one round trip, for statements whose results can wait.

        The statements are sent in psycopg's pipeline mode and run, with the
        entry as the user, in one implicit transaction that commits when the
        block ends (an error in any rolls back them all). A result read inside
        the block costs a round trip of its own; read after it, none: cursors
        hold their results once the block has ended. psycopg's own pool of the
        application's connections serves it: a checkout of SQLAlchemy's costs
        about what the round trip does.

        `durable=False`: the commit does not wait for the WAL to reach the disk,
        for what can be written again from elsewhere. A crash of the server or
        the machine may lose it; one of this process (kill -9) never does.
        """
        token = await self.user_token(user_id)
        entry = ENTER_SQL if durable else ENTER_NOT_DURABLE_SQL
        async with self._pipelined(self.app_engine, entry=(entry, (user_id, token))) as connection:
            yield connection

    @asynccontextmanager
    async def admin_pipeline(self, *, durable: bool = True) -> AsyncGenerator[psycopg.AsyncConnection, None]:
        """`admin_transaction` in one round trip, as `user_pipeline` is `user_transaction`'s."""
        entry = None if durable else (f"SELECT {NOT_DURABLE}", ())
        async with self._pipelined(self.engine, entry=entry) as connection:
            yield connection

    @asynccontextmanager
    async def admin_transaction(self) -> AsyncGenerator[AsyncConnection, None]:
        """A transaction as the owner login: schema and maintenance only."""
        async with self._begin(self.engine) as connection:
            yield connection

    async def ping(self) -> None:
        """One round trip to the server as the application's login (raises if it does not answer)."""
        async with self._begin(self.app_engine) as connection:
            await connection.execute(text("SELECT 1"))

    async def user_token(self, user_id: str) -> str:
        """What lets a transaction act as `user_id`: HMAC-SHA256 of the id, hex."""
        if self._key is None:
            async with self.admin_transaction() as connection:
                key: bytes = await connection.scalar(text("SELECT key FROM orchestrator_auth.secret"))
            self._key = key
        return hmac.new(self._key, user_id.encode(), hashlib.sha256).hexdigest()

    async def recover(self) -> bool:
        """After a failure: start the embedded server again if it died; whether it did."""
        if self._revive is None:
            return False
        return await asyncio.to_thread(self._revive)

    def unavailable(self, error: BaseException) -> DatabaseUnavailableError:
        """`error` as the one line a person reads."""
        detail = hide_passwords(first_line(error), self.url, self.app_engine.url)
        return DatabaseUnavailableError(UNAVAILABLE.format(at=f" at {self.where}", detail=detail))

    async def close(self) -> None:
        for pool in self._pipelines.values():
            await pool.close()
        await self.engine.dispose()
        if self.app_engine is not self.engine:
            await self.app_engine.dispose()

    @asynccontextmanager
    async def _pipelined(
        self, engine: AsyncEngine, *, entry: tuple[LiteralString, tuple[str, ...]] | None = None
    ) -> AsyncGenerator[psycopg.AsyncConnection, None]:
        """A pipeline on a connection of `engine`'s login, opened by `entry` (a statement, its values)."""
        pool = self._pipelines.get(engine) or await self._pipeline_pool(engine)
        try:
            connection = await pool.getconn()
        except (psycopg.OperationalError, PoolTimeout) as error:
            raise self.unavailable(error) from None
        try:
            async with connection.pipeline():
                if entry is not None:
                    await connection.execute(*entry)
                yield connection
        except psycopg.OperationalError as error:
            if connection.broken or connection.closed:  # the server went away mid-transaction
                raise self.unavailable(error) from None
            raise
        finally:
            await pool.putconn(connection)

    async def _pipeline_pool(self, engine: AsyncEngine) -> ServerPool:
        async with self._opening:
            if engine not in self._pipelines:
                url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
                pool = ServerPool.autocommit(url)
                await pool.open()
                self._pipelines[engine] = pool
        return self._pipelines[engine]

    @asynccontextmanager
    async def _begin(self, engine: AsyncEngine) -> AsyncGenerator[AsyncConnection, None]:
        connection = engine.connect()
        try:
            await connection.start()
        except (DBAPIError, OSError) as error:
            raise self.unavailable(error) from None
        try:
            async with connection.begin():
                yield connection
        except DBAPIError as error:
            if error.connection_invalidated:  # the server went away mid-transaction
                raise self.unavailable(error) from None
            raise
        finally:
            await connection.close()


def database_problem(error: BaseException) -> str | None:
    """One line if `error` (or what caused it) means the database is unreachable, else None."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, DatabaseUnavailableError):
            return str(seen)
        if isinstance(seen, PoolTimeout) or (
            isinstance(seen, psycopg.OperationalError) and not isinstance(seen, QueryCanceled)
        ):
            return UNAVAILABLE.format(at="", detail=hide_passwords(first_line(seen)))
        seen = seen.__cause__ or seen.__context__  # SQLAlchemy's errors wrap psycopg's
    return None


def _engine(url: URL, *, pool_size: int, max_overflow: int) -> AsyncEngine:
    engine = create_async_engine(
        url, pool_size=pool_size, max_overflow=max_overflow, connect_args=CONNECT_ARGS
    )
    event.listen(engine.sync_engine, "checkout", _refuse_dropped)
    return engine


def _refuse_dropped(dbapi_connection: object, record: object, proxy: object) -> None:
    """On checkout, a connection the server dropped (a restart) is replaced by a new one.

    Where `pool_pre_ping` would cost a round trip per transaction, this looks
    at the socket; a server that is gone then fails the new connection at once.
    """
    driver: object = getattr(dbapi_connection, "driver_connection", None)
    if isinstance(driver, psycopg.AsyncConnection) and dropped(cast(psycopg.AsyncConnection[object], driver)):
        raise DisconnectionError("the server closed this connection")


def driver_sql(statement: ClauseElement) -> LiteralString:
    """A SQLAlchemy statement as SQL for psycopg itself (`user_pipeline`), built once by callers.

    Every value must be a named `bindparam` (passed as `%(name)s`); a constant
    the compiler would bind needs `literal_column` instead.
    """
    compiled = statement.compile(dialect=psycopg_dialect.dialect())
    params: Mapping[str, object] = compiled.params or {}
    constants = [name for name, value in params.items() if value is not None]
    if constants:
        raise TypeError(f"values bound by SQLAlchemy, not named: {', '.join(constants)}")
    # Compiled from the caller's own statement, every value a parameter: no outside text in it.
    return cast(LiteralString, str(compiled))


def _psycopg_url(url: str) -> URL:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(f"DATABASE_URL is not a database URL: {hide_passwords(url)!r}") from None
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise ConfigError(f"DATABASE_URL must be a postgresql:// URL, not {parsed.drivername}://")
    return parsed.set(drivername="postgresql+psycopg")

