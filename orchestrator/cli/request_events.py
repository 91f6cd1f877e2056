"""The events of requests as `requests show` prints them: status, time, a short detail."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from orchestrator.cli.common import one_line, shown
from orchestrator.store.engine import Database
from orchestrator.store.models import request_events

# Status words are the log's own; a detail (a question, a decision, edited
# arguments as JSON) is cut to one line of this many characters.
DETAIL_CHARS = 200
STATUS_WIDTH = 12


@dataclass(frozen=True)
class RequestEvent:
    """One change in a request's life: its status, when, and what came with it."""

    status: str
    at: datetime | None
    detail: str | None


async def events_by_request(
    database: Database, request_ids: list[str], *, user_id: str
) -> dict[str, list[RequestEvent]]:
    """Each request's events in the order they happened (only the user's)."""
    async with database.user_transaction(user_id) as connection:
        rows = await connection.execute(
            select(
                request_events.c.request_id,
                request_events.c.status,
                request_events.c.at,
                request_events.c.detail,
            )
            .where(request_events.c.request_id.in_(request_ids))
            .order_by(request_events.c.id)
        )
        found: dict[str, list[RequestEvent]] = defaultdict(list)
        for row in rows:
            found[row.request_id].append(RequestEvent(row.status, row.at, row.detail))
    return found


def event_line(event: RequestEvent) -> str:
    """`2025-01-02 12:04:31  edited        decision=edit args={"a": 1} edited_args={"a": 2}`.

    Rich markup; the detail (read as JSON when it is some) escaped and cut to one line.
    """
    when = event.at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if event.at else "-" * 19
    line = f"[dim]{when}[/dim]  {shown(event.status).ljust(STATUS_WIDTH)}"
    if event.detail:
        line += f"  [dim]{shown(one_line(readable(event.detail), DETAIL_CHARS))}[/dim]"
    return line.rstrip()


def readable(detail: str) -> str:
    """A detail as a person reads it: JSON as `key=value` pairs, the questions of a pause in brief."""
    try:
        body = json.loads(detail)
    except json.JSONDecodeError:
        return detail
    if not isinstance(body, dict):
        return detail
    if isinstance(body.get("asked"), list):
        return "asked: " + " | ".join(_question(entry) for entry in body["asked"])
    pairs = (f"{key}={_value(value)}" for key, value in body.items() if value not in (None, ""))
    return " ".join(pairs)


def _question(entry: object) -> str:
    """`approval · files › mail · send {"to": "x"} (why: ...)` from a paused call's question."""
    question = entry.get("question") if isinstance(entry, dict) else None
    if not isinstance(question, dict) or not isinstance(question.get("action"), dict):
        return _value(entry)
    action = question["action"]
    path = " › ".join(str(name) for name in question.get("agent_path") or []) or "orchestrator"
    kind, name = question.get("kind", "?"), action.get("name", "?")
    text = f"{kind} · {path} · {name} {_value(action.get('args', {}))}"
    return f"{text} (why: {question['why']})" if question.get("why") else text


def _value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
