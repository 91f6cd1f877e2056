"""`orchestrator usage` and `/trace` fit the terminal and never cut a figure (issue 42, item 14)."""

from __future__ import annotations

import io
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from rich.console import Console

from orchestrator.cli.usage_report import PIPED_WIDTH, _report, _rows
from orchestrator.store.timeline import TimelineRow
from orchestrator.terminal.waterfall import waterfall
from orchestrator.usage.billing import Billing
from orchestrator.usage.meter import Totals
from orchestrator.usage.tokens import TokenCount

CUT_FIGURE = re.compile(r"[\d$,.]…")  # rich's ellipsis where a number was cut
DAY = date(2026, 11, 28)
LONG_MODEL = "accounts/fireworks/models/llama-v3p1-405b-instruct"


def two_days(*, tool: str = "web_search_agent_search") -> dict[date, Totals]:
    days = {DAY - timedelta(days=1): Totals(), DAY: Totals()}
    for totals in days.values():
        tokens = TokenCount(input=1_234_567, output=345_678, cached_input=1_000_000, reasoning=12_345)
        totals.models[LONG_MODEL].add(tokens, 12.3456, 1.0)
        totals.models["mystery"].add(TokenCount(input=30, output=3), None, 1.0)
        totals.tools[tool].add(Billing(total_cost_usd=0.25))
    return days


FIGURES = [
    "2026-11-27", "2026-11-28", "1,234,567", "345,678", "1,000,000", "12,345", "$12.35",
    "price unknown", "$0.25",
]


def rendered(days: dict[date, Totals], *, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(_report(_rows(days), width=width), soft_wrap=False)
    return console.file.getvalue()


@pytest.mark.parametrize("width", [80, 100, PIPED_WIDTH])
def test_usage_fits_the_width_and_every_figure_is_whole(width: int):
    shown = rendered(two_days(), width=width)

    assert all(len(line) <= width for line in shown.splitlines()), shown
    assert not CUT_FIGURE.search(shown), shown
    for figure in FIGURES:
        assert figure in shown, f"{figure} whole at {width} columns:\n{shown}"


def test_piped_usage_with_a_name_too_long_for_any_table_is_complete():
    name = "a_tool_whose_name_is_long_" * 6
    shown = rendered(two_days(tool=name), width=PIPED_WIDTH)

    assert not CUT_FIGURE.search(shown), shown
    assert all(figure in shown for figure in FIGURES), shown


def test_trace_fits_80_columns_with_its_figures_whole():
    start = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    rows = [
        TimelineRow(
            "model", LONG_MODEL, "m1", None, start, start + timedelta(seconds=12.5),
            input_tokens=123_456, output_tokens=7_890, cost_usd=1.2345,
        ),
        TimelineRow(
            "tool", "web_search_agent_search", "t1", None, start + timedelta(seconds=12.5),
            start + timedelta(seconds=20), status="failure",
        ),
    ]
    console = Console(file=io.StringIO(), width=80, color_system=None)
    for line in waterfall(rows, columns=80):
        console.print(line, highlight=False, soft_wrap=True)
    shown = console.file.getvalue()

    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    assert len(shown.splitlines()) == 3, "a line per call, under the axis"
    for figure in ("20.00s", "12.50s", "123456+7890 tokens", "$1.2345", "7.50s", "failure"):
        assert figure in shown, shown
