"""The request tracking table: every tool call, its parent, and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, text, update
from sqlalchemy.dialects.postgresql import insert

from orchestrator.store.engine import Database
from orchestrator.store.models import requests
from orchestrator.tools.executor import CallRecord
from orchestrator.tools.results import ToolResult

ANONYMOUS = "anonymous"


class RequestLog:
    """Records tool calls as the executor reports them (a `RequestObserver`)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def started(self, call: CallRecord) -> None:
        user_id = call.user_id or ANONYMOUS
        async with self.database.user_transaction(user_id) as connection:
            await connection.execute(
                insert(requests).values(
                    request_id=call.request_id,
                    parent_request_id=call.parent_request_id,
                    session_id=call.session_id,
                    user_id=user_id,
                    tool=call.tool,
                    action=call.action,
                    parameters=call.parameters,
                    status="running",
                )
            )

    async def finished(self, call: CallRecord, result: ToolResult) -> None:
        failed = result.status == "failure"
        body = result.model_dump(mode="json", exclude_none=True)
        async with self.database.user_transaction(call.user_id or ANONYMOUS) as connection:
            await connection.execute(
                update(requests)
                .where(requests.c.request_id == call.request_id)
                .values(
                    status="failed" if failed else "completed",
                    result=None if failed else body,
                    error=body if failed else None,
                    updated_at=func.now(),
                )
            )


@dataclass(frozen=True)
class RequestNode:
    """A request in a tree, `depth` levels below the one asked for."""

    depth: int
    request_id: str
    parent_request_id: str | None
    tool: str
    action: str | None
    status: str
    parameters: dict[str, object]
    message: str
    created_at: datetime
    updated_at: datetime


TREE = text(
    """WITH RECURSIVE tree AS (
        SELECT r.*, 0 AS depth, ARRAY[r.created_at] AS path FROM requests r WHERE request_id = :root
        UNION ALL
        SELECT c.*, tree.depth + 1, tree.path || c.created_at
        FROM requests c JOIN tree ON c.parent_request_id = tree.request_id
    )
    SELECT depth, request_id, parent_request_id, tool, action, status, parameters,
           COALESCE(result ->> 'message', error ->> 'message', '') AS message, created_at, updated_at
    FROM tree ORDER BY path"""
)


async def request_tree(database: Database, request_id: str, *, user_id: str) -> list[RequestNode]:
    """The request and everything it caused, depth first; empty if the user has no such request."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(TREE, {"root": request_id})
        return [RequestNode(**row._mapping) for row in rows]
