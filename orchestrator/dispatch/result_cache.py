"""The result cache stage: an idempotent folder's call answered from an earlier result.

A folder declares it (`cache:` in its `tool_config.yaml`, see
`folders.cache_config`); the entry is the user's own, for the folder's approved
content, the call and its validated arguments, and lasts `ttl_seconds`. A hit
runs nothing and costs nothing: the stage answers before the background
handover, the usage hook and the tool, and the request log records the call
with a `cache_hit` event. Only a success is kept. Without a database (an
in-memory session) nothing is cached; ORCHESTRATOR_RESULT_CACHE=false or
`--no-cache` leaves the stage out of the pipeline.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic_core import PydanticSerializationError, to_jsonable_python

from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.folders.cache_config import ttl_of
from orchestrator.sources.loaded import CONTENT_KEY
from orchestrator.store.result_cache import CacheKey, cached, keep, record_hit
from orchestrator.tools.context import UserDatabase
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import annotate

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The time now, as the cache compares expiry with it."""
    return datetime.now(UTC)


class ResultCacheMiddleware:
    """Answers a call of a cached action from the user's entry, or keeps its success for next time.

    `clock` says the time entries are made and expire by (a test sets its own).
    The cache never costs the user a result: a database that fails it is
    logged, and the call runs as if there were no cache.
    """

    def __init__(self, *, clock: Clock = utc_now) -> None:
        self._clock = clock

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        database = request.context.database
        entry = _entry(request) if database is not None else None
        if database is None or entry is None:
            return await handler(request)
        key, ttl = entry
        hit = await self._lookup(database, key, request_id=request.record.request_id)
        if hit is not None:
            annotate({"orchestrator.cache": "hit"})
            return hit.model_copy(update=request.ids)
        result = await handler(request)
        if result.status == "success":  # not a failure, nor a call gone to the background (partial)
            await self._keep(database, key, result, request_id=request.record.request_id, ttl=ttl)
        return result

    async def _lookup(
        self, database: UserDatabase, key: CacheKey, *, request_id: str
    ) -> ToolResult | None:
        """The entry's result, its hit recorded; None on a miss."""
        try:
            async with database.transaction() as connection:
                hit = await cached(connection, key, user_id=database.user_id, now=self._clock())
                if hit is None:
                    return None
                # Read first: an entry this version cannot read (kept by an older one) is a miss.
                result = ToolResult.model_validate(hit.result)
                await record_hit(connection, request_id, hit, user_id=database.user_id)
                return result
        except Exception as error:  # the cache must never cost the user a result
            logger.warning("result cache lookup failed: %s: %s", type(error).__name__, _first(error))
            return None

    async def _keep(
        self, database: UserDatabase, key: CacheKey, result: ToolResult, *, request_id: str, ttl: int
    ) -> None:
        # Kept without the ids of the call that made it (a hit takes its own) and without
        # its billing: a hit costs nothing.
        body = result.model_dump(
            mode="json", exclude={"request_id", "parent_request_id", "billing"}, exclude_none=True
        )
        try:
            async with database.transaction() as connection:
                await keep(
                    connection,
                    key,
                    body,
                    user_id=database.user_id,
                    request_id=request_id,
                    now=self._clock(),
                    ttl_seconds=ttl,
                )
        except Exception as error:  # as above: the result stands, it is only not kept
            logger.warning("result cache write failed: %s: %s", type(error).__name__, _first(error))


def _entry(request: CallRequest) -> tuple[CacheKey, int] | None:
    """The cache key of `request` and its entry's lifetime; None for a call never cached.

    Only a folder's tool (it carries the approved content hash) whose action its
    folder caches, that is idempotent and that nobody marked sensitive.
    """
    tool = request.tool
    metadata = (tool.metadata or {}) if tool is not None else {}
    ttl = ttl_of(metadata.get("cache"), _text(metadata.get("action")))
    folder, content = _text(metadata.get("folder")), _text(metadata.get(CONTENT_KEY))
    if ttl is None or folder is None or content is None:
        return None
    if not request.policy.idempotent or metadata.get("sensitive"):
        return None
    arguments = canonical_arguments(request)
    if arguments is None:
        return None
    return CacheKey(folder, content, request.name, arguments), ttl


def canonical_arguments(request: CallRequest) -> str | None:
    """SHA-256 of the call's arguments as validated (defaults filled in), as sorted JSON.

    None for arguments JSON cannot hold: such a call is not cached.
    """
    parsed = request.parsed
    try:
        values = parsed.model_dump(mode="json") if parsed is not None else request.arguments
        text = json.dumps(
            to_jsonable_python(values), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (PydanticSerializationError, TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _first(error: Exception) -> str:
    # One line: SQLAlchemy's text holds the statement and its parameters.
    return (str(error).strip().splitlines() or [""])[0]
