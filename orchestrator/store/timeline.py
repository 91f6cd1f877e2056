"""A turn's model and tool calls on one time axis, from the request log (what a waterfall draws).

A tool call runs from its request's creation to its last update. A model call's
usage row is written as its step's work is saved, at its end: it ran for its
`seconds` before that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Row, text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.store.engine import Database
from orchestrator.store.requests import call_name_of

# A row of these statements: its columns read by name.
_Row = Row[*tuple[object, ...]]
# The calls of a session within a time window, and everything below them.
WINDOW_TOOLS = text(
    """WITH RECURSIVE tree AS (
        SELECT r.* FROM requests r
        WHERE r.session_id = :session AND r.created_at BETWEEN :since AND :until
        UNION
        SELECT c.* FROM requests c JOIN tree ON c.parent_request_id = tree.request_id
    )
    SELECT request_id, parent_request_id, tool, action, call_name, status, outcome, created_at,
        updated_at
    FROM tree"""
)
TREE_TOOLS = text(
    """WITH RECURSIVE tree AS (
        SELECT r.* FROM requests r WHERE r.request_id = :root
        UNION ALL
        SELECT c.* FROM requests c JOIN tree ON c.parent_request_id = tree.request_id
    )
    SELECT request_id, parent_request_id, tool, action, call_name, status, outcome, created_at,
        updated_at
    FROM tree"""
)
MODELS = text(
    """SELECT request_id, parent_request_id, name, input_tokens, output_tokens, cost_usd,
              seconds, created_at
    FROM request_usage
    WHERE kind = 'model' AND (
        (session_id = :session AND turn_id = :turn) OR parent_request_id = ANY(:parents)
    )"""
)
TOOL_USAGE = text(
    """SELECT request_id, input_tokens, output_tokens, cost_usd FROM request_usage
    WHERE kind = 'tool' AND request_id = ANY(:ids)"""
)


@dataclass(frozen=True)
class TimelineRow:
    """One call on the axis: what it was, below which call, when, and what it used."""

    kind: Literal["model", "tool"]
    name: str
    request_id: str
    parent_request_id: str | None
    start: datetime
    end: datetime
    status: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    @property
    def seconds(self) -> float:
        """How long the call took."""
        return max(0.0, (self.end - self.start).total_seconds())


async def turn_timeline(
    database: Database,
    *,
    user_id: str,
    session_id: str,
    turn_id: str,
    since: datetime,
    until: datetime,
) -> list[TimelineRow]:
    """The turn `turn_id` of the session (it ran from `since` to `until`): its calls, by start."""
    async with database.user_transaction(user_id) as connection:
        window = {"session": session_id, "since": since, "until": until}
        tools = (await connection.execute(WINDOW_TOOLS, window)).all()
        return await _with_models(connection, tools, session_id=session_id, turn_id=turn_id)


async def request_timeline(
    database: Database, request_id: str, *, user_id: str
) -> list[TimelineRow]:
    """The request and everything below it (model calls of agents included), by start."""
    async with database.user_transaction(user_id) as connection:
        tools = (await connection.execute(TREE_TOOLS, {"root": request_id})).all()
        return await _with_models(connection, tools, session_id="", turn_id="")


async def _with_models(
    connection: AsyncConnection, tools: Sequence[_Row], *, session_id: str, turn_id: str
) -> list[TimelineRow]:
    ids = [row.request_id for row in tools]
    billed = {
        row.request_id: row for row in (await connection.execute(TOOL_USAGE, {"ids": ids})).all()
    }
    rows = [_tool(row, billed.get(row.request_id)) for row in tools]
    parameters = {"session": session_id, "turn": turn_id, "parents": ids}
    rows += [_model(row) for row in (await connection.execute(MODELS, parameters)).all()]
    return sorted(rows, key=lambda row: (row.start, row.end))


def _tool(row: _Row, usage: _Row | None) -> TimelineRow:
    return TimelineRow(
        kind="tool",
        name=call_name_of(row.call_name, row.tool, row.action),  # as the model and tasks name it
        request_id=row.request_id,
        parent_request_id=row.parent_request_id,
        start=row.created_at,
        end=row.updated_at,
        status=row.outcome or row.status,
        input_tokens=usage.input_tokens if usage is not None else 0,
        output_tokens=usage.output_tokens if usage is not None else 0,
        cost_usd=usage.cost_usd if usage is not None else None,
    )


def _model(row: _Row) -> TimelineRow:
    return TimelineRow(
        kind="model",
        name=row.name,
        request_id=row.request_id,
        parent_request_id=row.parent_request_id,
        start=row.created_at - timedelta(seconds=row.seconds),
        end=row.created_at,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=row.cost_usd,
    )
