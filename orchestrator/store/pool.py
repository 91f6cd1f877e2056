"""psycopg connection pools that fail at once when the server cannot be reached."""

from __future__ import annotations

import logging
import select

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

# libpq waits 130 s by default for a server that does not answer: say so sooner.
CONNECT_ARGS = {"connect_timeout": 5}


# How long a pool keeps trying to replace a lost connection in the
# background (psycopg's default is five minutes of retries).
RECONNECT_SECONDS = 30.0


# What the pool logs as warnings while the server is away: a lost connection and
# each failed reconnection attempt, in bursts of multi-line libpq text. What failed
# for the user already says so in one line.
RECONNECTING_MESSAGES = (
    "discarding broken connection",
    "discarding closed connection",
    "error connecting in",
    "reconnection attempt in pool",
)


class _QuietReconnecting(logging.Filter):
    """Lower the pool's reconnection warnings to DEBUG; its other warnings stay as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        reconnecting = str(record.msg).startswith(RECONNECTING_MESSAGES)
        if record.levelno != logging.WARNING or not reconnecting:
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        # handlers without a level of their own pass any record: ask the logger
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


logging.getLogger("psycopg.pool").addFilter(_QuietReconnecting())


class ServerPool(AsyncConnectionPool):
    """psycopg's pool, failing at once when the server cannot be reached.

    Left to itself the pool hands out a connection the server dropped, or,
    with none at hand, waits out its whole timeout (30 s) while it retries
    connecting in the background. Here a connection the server dropped is
    noticed without a round trip and replaced, and after a connection was
    lost, a checkout that would wait for a new one tries the server first, in
    the caller, whose error then says what is wrong.
    """

    _lost = False  # a connection was lost and the server has not answered since

    async def getconn(self, timeout: float | None = None) -> AsyncConnection:
        """A pooled connection the server has not dropped, or the error of connecting to it.

        No round trip: a connection is taken for dropped when its socket has
        something to read while it is idle (the server's goodbye, or its end).
        """
        for _ in range(self.max_size + 1):
            if self._lost and not self.get_stats().get("pool_available"):
                await self._reachable()
            connection = await super().getconn(timeout)
            if not dropped(connection):
                return connection
            self._lost = True
            await connection.close()  # so that the pool discards it
            await self.putconn(connection)
        await self._reachable()  # every pooled one was dead: if the server is gone, say so
        return await super().getconn(timeout)

    async def putconn(self, conn: AsyncConnection) -> None:
        """Return `conn`; one that broke in use means the server may be gone."""
        if conn.broken:
            self._lost = True
        await super().putconn(conn)

    async def _reachable(self) -> None:
        probe = await AsyncConnection.connect(str(self.conninfo), connect_timeout=CONNECT_ARGS["connect_timeout"])
        await probe.close()
        self._lost = False

    @classmethod
    def autocommit(cls, url: str, **connection: object) -> ServerPool:
        """A pool (not opened yet) of autocommit connections to `url`, with `connection` options."""
        return cls(
            url,
            min_size=1,
            max_size=5,
            open=False,
            reconnect_timeout=RECONNECT_SECONDS,
            kwargs={"autocommit": True, **connection, **CONNECT_ARGS},
        )


def dropped(connection: AsyncConnection[object]) -> bool:
    """Whether the server dropped the idle `connection`, known without asking it.

    An idle connection's server sends nothing unprompted (no LISTEN here) but
    its last words before closing, or the end of the stream when it died.
    """
    if connection.closed or connection.broken:
        return True
    poll = select.poll()
    poll.register(connection.fileno(), select.POLLIN)
    return bool(poll.poll(0))
