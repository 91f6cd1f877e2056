"""`orchestrator usage`: a user's tokens and cost per day and model, from the request log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import JsonOption, UserOption, out, with_database
from orchestrator.cli.cost import MODEL_COLUMNS, PRICE_UNKNOWN, model_figures
from orchestrator.cli.json_out import dumps
from orchestrator.folders.untrusted import shown_name
from orchestrator.usage.meter import Totals
from orchestrator.usage.money import usd

if TYPE_CHECKING:
    from orchestrator.store.engine import Database

PIPED_WIDTH = 160
NAME_MIN = 12  # the name column wraps down to this, never the figures
HEADINGS = MODEL_COLUMNS + ("cost",)
NOTHING = "No usage recorded for {user}{since}."


def since_day(value: str | None) -> date | None:
    """The --since day: YYYY-MM-DD, or `today`."""
    if value is None:
        return None
    if value.strip().lower() == "today":
        return date.today()
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise typer.BadParameter(f"a day as YYYY-MM-DD or 'today', not {value[:40]!r}") from None


@dataclass(frozen=True)
class _Row:
    """A model's or a tool's usage on a day; `cells` are the day's and HEADINGS' as shown."""

    day: date
    name: str
    figures: tuple[str, ...]

    @property
    def cells(self) -> tuple[str, ...]:
        return (self.day.isoformat(), *self.figures)


SinceOption = Annotated[
    str | None,
    typer.Option(
        "--since", help="From this day on (YYYY-MM-DD, UTC, or 'today').", show_default=False
    ),
]


def usage(
    user: UserOption = "local", since: SinceOption = None, as_json: JsonOption = False
) -> None:
    """Tokens and cost per day and model (and billed tool), from the request log."""
    day = since_day(since)
    from orchestrator.store.migrations import upgrade
    from orchestrator.store.usage_log import usage_report

    async def run(database: Database) -> None:
        await upgrade(database)  # a database from before usage was kept has no rows yet
        report = await usage_report(database, user_id=user, since=day)
        if as_json:
            print(dumps(report.to_json()))
        elif not report.days:
            out.print(NOTHING.format(user=user, since=f" since {day}" if day else ""), markup=False)
        else:
            # Piped, it is not laid out for 80 columns: it is read by people and by grep.
            console = out if out.is_terminal else Console(file=out.file, width=PIPED_WIDTH)
            shown = _report(_rows(report.days), width=console.width)
            console.print(shown, highlight=False, soft_wrap=False)
            out.print(_total_line(report.total), highlight=False, markup=False)

    with_database(run)


def _rows(days: dict[date, Totals]) -> list[_Row]:
    rows: list[_Row] = []
    for day, totals in days.items():
        for name, model in sorted(totals.models.items()):
            rows.append(_Row(day, shown_name(name), model_figures(model)))
        for name, tool in sorted(totals.tools.items()):
            figures = (f"{tool.calls:,}", "", "", "", "", usd(tool.cost_usd))
            rows.append(_Row(day, f"{shown_name(name)} (tool)", figures))
    return rows


def _report(rows: list[_Row], *, width: int) -> RenderableType:
    """A table when its figures fit `width` whole (the names may wrap); else a line per figure."""
    headings = ("day", *HEADINGS)
    widest = [max(len(h), *(len(row.cells[i]) for row in rows)) for i, h in enumerate(headings)]
    if sum(widest) + NAME_MIN + 2 * len(widest) <= width:
        return _table(rows)
    return _blocks(rows, width=width)


def _table(rows: list[_Row]) -> Table:
    table = Table(box=None, pad_edge=False)
    table.add_column("day", no_wrap=True)
    table.add_column("model or tool", min_width=NAME_MIN, overflow="fold")
    for heading in HEADINGS:
        table.add_column(heading, justify="right", no_wrap=True)
    shown_day = None
    for row in rows:
        day = row.day.isoformat() if row.day != shown_day else ""
        shown_day = row.day
        table.add_row(day, Text(row.name), *row.figures)
    return table


def _blocks(rows: list[_Row], *, width: int) -> Group:
    """Too narrow for the table: each day, its models and tools below it, their figures labelled."""
    lines: list[Text] = []
    shown_day = None
    for row in rows:
        if row.day != shown_day:
            lines.append(Text(row.day.isoformat(), style="bold"))
            shown_day = row.day
        lines.append(Text(f"  {row.name}"))
        figures = [f"{h} {v}" for h, v in zip(HEADINGS, row.figures, strict=True) if v]
        lines.extend(Text(line) for line in _packed(figures, width=width, indent="    "))
    return Group(*lines)


def _packed(parts: list[str], *, width: int, indent: str) -> list[str]:
    """`parts` joined by " · " in lines of `width` at most, a part never split (if it fits)."""
    lines = [indent]
    for part in parts:
        joined = f"{lines[-1]} · {part}" if lines[-1] != indent else f"{indent}{part}"
        if len(joined) > width and lines[-1] != indent:
            lines.append(f"{indent}{part}")
        else:
            lines[-1] = joined
    return lines


def _total_line(total: Totals) -> str:
    tokens = total.tokens
    line = (
        f"total: {tokens.input:,} tokens in, {tokens.output:,} out · {usd(total.cost_usd)} "
        f"(models {usd(total.model_cost_usd)}, tools {usd(total.tool_cost_usd)})"
    )
    if total.credits:
        line += f" · {total.credits:,.2f} credits"
    if not total.priced:
        line += f" · {PRICE_UNKNOWN} for {', '.join(map(shown_name, total.unpriced_models))}"
    return line
