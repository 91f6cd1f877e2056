"""`orchestrator usage`: a user's tokens and cost per day and model, from the request log."""

from __future__ import annotations

import json
from datetime import date
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import JsonOption, UserOption, out, with_database
from orchestrator.cli.cost import MODEL_COLUMNS, PRICE_UNKNOWN, model_cells
from orchestrator.folders.untrusted import shown_name
from orchestrator.usage.meter import Totals
from orchestrator.usage.money import usd

if TYPE_CHECKING:
    from orchestrator.store.engine import Database

PIPED_WIDTH = 160
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
            print(json.dumps(report.to_json(), ensure_ascii=False))
        elif not report.days:
            out.print(NOTHING.format(user=user, since=f" since {day}" if day else ""), markup=False)
        else:
            # Piped, the table is not cut to 80 columns: it is read by people and by grep.
            width = None if out.is_terminal else PIPED_WIDTH
            out.print(_table(report.days), highlight=False, width=width)
            out.print(_total_line(report.total), highlight=False, markup=False)

    with_database(run)


def _table(days: dict[date, Totals]) -> Table:
    table = Table(box=None, pad_edge=False)
    table.add_column("day")
    table.add_column("model or tool")
    for heading in MODEL_COLUMNS:
        table.add_column(heading, justify="right")
    table.add_column("cost", justify="right", no_wrap=True)
    for day, totals in days.items():
        shown_day = day.isoformat()
        for name, model in sorted(totals.models.items()):
            table.add_row(shown_day, *model_cells(name, model))
            shown_day = ""
        for name, tool in sorted(totals.tools.items()):
            table.add_row(
                shown_day,
                Text(f"{shown_name(name)} (tool)"),
                f"{tool.calls:,}",
                "",
                "",
                "",
                "",
                usd(tool.cost_usd),
            )
            shown_day = ""
    return table


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
