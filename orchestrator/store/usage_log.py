"""Usage as the request log keeps it: a session's totals, and a user's by day and model.

A row with no `cost_usd` is a call no price was known for: it counts as an
unpriced call, never as a free one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from functools import cache
from typing import LiteralString

from psycopg.rows import class_row
from sqlalchemy import bindparam, func, literal_column, select
from sqlalchemy.sql.elements import ColumnElement

from orchestrator.store.engine import Database, driver_sql
from orchestrator.store.models import request_usage
from orchestrator.usage.meter import ModelTotals, ToolTotals, Totals
from orchestrator.usage.tokens import TokenCount

_U = request_usage.c
_TOKEN_COLUMNS = {
    "input": _U.input_tokens,
    "output": _U.output_tokens,
    "cached_input": _U.cached_input_tokens,
    "cache_write": _U.cache_write_tokens,
    "reasoning": _U.reasoning_tokens,
}


@dataclass(frozen=True)
class UsageGroup:
    """The usage of one model or billed tool (`kind`, `name`), as `_sums` adds it up."""

    kind: str
    name: str
    calls: int
    # PostgreSQL's sum of a bigint is a numeric
    input: int | Decimal
    output: int | Decimal
    cached_input: int | Decimal
    cache_write: int | Decimal
    reasoning: int | Decimal
    cost_usd: float
    unpriced_calls: int
    credits: float
    seconds: float


def _sums() -> list[ColumnElement[int] | ColumnElement[float]]:
    """The aggregates every usage query reads into totals."""
    return [
        func.count().label("calls"),
        *(
            func.coalesce(func.sum(column), literal_column("0")).label(name)
            for name, column in _TOKEN_COLUMNS.items()
        ),
        func.coalesce(func.sum(_U.cost_usd), literal_column("0.0")).label("cost_usd"),
        func.count().filter(_U.cost_usd.is_(None)).label("unpriced_calls"),
        func.coalesce(func.sum(_U.credits), literal_column("0.0")).label("credits"),
        func.coalesce(func.sum(_U.seconds), literal_column("0.0")).label("seconds"),
    ]


async def session_totals(database: Database, session_id: str, *, user_id: str) -> Totals:
    """What the session has spent so far, by model and by billed tool."""
    async with database.user_pipeline(user_id) as connection:
        cursor = connection.cursor(row_factory=class_row(UsageGroup))
        await cursor.execute(_session_totals(), {"session_id": session_id})
    totals = Totals()
    _add_rows(totals, await cursor.fetchall())
    return totals


@cache
def _session_totals() -> LiteralString:
    return driver_sql(
        select(_U.kind, _U.name, *_sums())
        .where(_U.session_id == bindparam("session_id"))
        .group_by(_U.kind, _U.name)
    )


@dataclass
class UsageReport:
    """A user's usage since a day: totals per UTC day, and over the whole span."""

    user_id: str
    since: date | None
    days: dict[date, Totals] = field(default_factory=dict)

    @property
    def total(self) -> Totals:
        """Every day's counts together."""
        total = Totals()
        for day in self.days.values():
            total.merge(day)
        return total

    def to_json(self) -> dict[str, object]:
        """The report as `orchestrator usage --json` prints it."""
        total = self.total
        return {
            "user": self.user_id,
            "since": self.since.isoformat() if self.since else None,
            "days": {day.isoformat(): _totals_json(totals) for day, totals in self.days.items()},
            "total": _totals_json(total),
        }


async def usage_report(
    database: Database, *, user_id: str, since: date | None = None
) -> UsageReport:
    """The user's usage per UTC day and model (and billed tool), from `since` on."""
    day = func.date(func.timezone("UTC", _U.created_at)).label("day")
    query = select(day, _U.kind, _U.name, *_sums()).group_by(day, _U.kind, _U.name).order_by(day)
    if since is not None:
        query = query.where(_U.created_at >= datetime.combine(since, time(), tzinfo=UTC))
    async with database.user_transaction(user_id) as connection:
        rows = (await connection.execute(query)).mappings().all()
    report = UsageReport(user_id=user_id, since=since)
    for row in rows:
        group = UsageGroup(**{name: value for name, value in row.items() if name != "day"})
        _add_rows(report.days.setdefault(row["day"], Totals()), [group])
    return report


def _add_rows(totals: Totals, rows: Iterable[UsageGroup]) -> None:
    for row in rows:
        if row.kind == "model":
            tokens = TokenCount(**{name: int(getattr(row, name)) for name in _TOKEN_COLUMNS})
            totals.merge(_one_model(row.name, row, tokens))
        else:
            tool = ToolTotals(calls=row.calls, cost_usd=row.cost_usd, credits=row.credits)
            totals.merge(Totals(tools={row.name: tool}))


def _one_model(name: str, row: UsageGroup, tokens: TokenCount) -> Totals:
    model = ModelTotals(
        calls=row.calls,
        tokens=tokens,
        cost_usd=row.cost_usd,
        unpriced_calls=row.unpriced_calls,
        seconds=row.seconds,
    )
    return Totals(models={name: model})


def _totals_json(totals: Totals) -> dict[str, object]:
    # As `ask --json`: no total when a price is unknown (the known part is model_cost_usd's).
    return {**totals.to_json(), "cost_usd": totals.cost_usd if totals.priced else None}
