"""What the chat and `ask` show of usage: `/cost`'s table and the quiet line after an answer.

A cost is shown only where a price is known: a model no price is known for
shows its tokens and "price unknown", never a guessed number.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from orchestrator.folders.untrusted import shown_name
from orchestrator.usage.meter import ModelTotals, ToolTotals, Totals, UsageMeter
from orchestrator.usage.money import usd

if TYPE_CHECKING:
    from orchestrator.conversation.session import TurnResult

PRICE_UNKNOWN = "price unknown"
USAGE_UNREPORTED = "unknown: usage not reported"
NOTHING_YET = "No model or tool calls in this session yet."
UNBILLED_NAMES = 5  # tools named in the line of calls without a cost


def cost_table(meter: UsageMeter) -> RenderableType:
    """`/cost`: the session's tokens and cost by model, its tool costs, the total, and its time."""
    totals = meter.session
    parts: list[RenderableType] = []
    if totals.models:
        parts.append(_models_table(totals))
    billed = {name: tool for name, tool in totals.tools.items() if tool.cost_usd or tool.credits}
    if billed:
        parts.append(_tools_table(billed))
    unbilled = {name: tool.calls for name, tool in totals.tools.items() if name not in billed}
    if unbilled:
        parts.append(Text(_unbilled(unbilled), style="dim"))
    if not totals.models and not totals.tools:
        parts.append(Text(NOTHING_YET))
    else:
        parts.append(Text.from_markup(f"[bold]total[/bold]  {escape(_total(totals))}"))
    parts.append(Text(_time(meter, totals), style="dim"))
    return Group(*parts)


def turn_cost_line(result: TurnResult) -> str | None:
    """The quiet line after an answer: the turn's tokens and cost.

    None when nothing was counted, or when a price is unknown (then no line
    is shown at all: `/cost` says which model has no price).
    """
    usage = result.usage
    cost = result.cost_usd
    if cost is None or (not usage.models and not usage.tool_cost_usd and not usage.credits):
        return None
    tokens = usage.tokens
    inputs = f"{tokens.input:,} tokens in"
    if tokens.cached_input:
        inputs += f" ({tokens.cached_input:,} cached)"
    outputs = f"{tokens.output:,} out"
    if tokens.reasoning:
        outputs += f" ({tokens.reasoning:,} reasoning)"
    parts = [inputs, outputs, usd(cost)]
    if usage.tool_cost_usd:
        parts[-1] += f" (tools {usd(usage.tool_cost_usd)})"
    if usage.credits:
        parts.append(f"{_number(usage.credits)} credits")
    return "turn: " + " · ".join(parts)


def show_turn_cost(result: TurnResult | None, console: Console) -> None:
    """Print the turn's cost line, dim, on `console` when the turn ended with a known price."""
    if result is None or result.questions:
        return  # failed, or paused: the line comes after the answer
    line = turn_cost_line(result)
    if line is not None:
        console.print(line, style="dim", markup=False, highlight=False)


MODEL_COLUMNS = ("calls", "input", "cached input", "output", "reasoning")


def _models_table(totals: Totals) -> Table:
    table = Table(title="models", title_justify="left", box=None, pad_edge=False)
    table.add_column("model")
    for heading in MODEL_COLUMNS:
        table.add_column(heading, justify="right")
    table.add_column("cost", justify="right", no_wrap=True)
    for name, model in sorted(totals.models.items()):
        table.add_row(*model_cells(name, model))
    return table


def model_cells(name: str, model: ModelTotals) -> list[RenderableType]:
    """A model's row: its name, calls and tokens (as MODEL_COLUMNS), and its cost."""
    return [Text(shown_name(name)), *model_figures(model)]


def model_figures(model: ModelTotals) -> tuple[str, ...]:
    """A model's calls and tokens (as MODEL_COLUMNS) and its cost, as shown."""
    tokens = model.tokens
    counts = (model.calls, tokens.input, tokens.cached_input, tokens.output, tokens.reasoning)
    return (*(f"{count:,}" for count in counts), model_cost(model))


def model_cost(model: ModelTotals) -> str:
    """A model's cost as shown: in dollars, "price unknown", or what is known and what is not."""
    if model.priced:
        return usd(model.cost_usd)
    unknown = PRICE_UNKNOWN if not model.unreported_calls else USAGE_UNREPORTED
    if model.unpriced_calls == model.calls:
        return unknown
    # Some calls priced (a price set later, say): what is known, and what is not.
    return f"{usd(model.cost_usd)} + {unknown} ({_count(model.unpriced_calls, 'call')})"


def _tools_table(tools: dict[str, ToolTotals]) -> Table:
    table = Table(title="tools", title_justify="left", box=None, pad_edge=False)
    table.add_column("tool")
    table.add_column("calls", justify="right")
    table.add_column("cost", justify="right")
    credits = any(tool.credits for tool in tools.values())
    if credits:
        table.add_column("credits", justify="right")
    for name, tool in sorted(tools.items()):
        row = [Text(shown_name(name)), f"{tool.calls:,}", usd(tool.cost_usd)]
        table.add_row(*row, *([_number(tool.credits)] if credits else []))
    return table


def _total(totals: Totals) -> str:
    parts = [f"models {usd(totals.model_cost_usd)}", f"tools {usd(totals.tool_cost_usd)}"]
    if totals.credits:
        parts.append(f"{_number(totals.credits)} credits")
    total = f"{usd(totals.cost_usd)} ({', '.join(parts)})"
    if totals.priced:
        return total
    return f"{total}, and {PRICE_UNKNOWN} for {', '.join(map(shown_name, totals.unpriced_models))}"


def _time(meter: UsageMeter, totals: Totals) -> str:
    line = f"time: {_duration(meter.elapsed_seconds)} in this process"
    if not totals.models:
        return line
    # The model calls' time is the session's: earlier processes' calls count too.
    in_models = sum(model.seconds for model in totals.models.values())
    return f"{line} · {_duration(in_models)} in the session's model calls"


def _duration(seconds: float) -> str:
    """12.3s, 4m 05s, 2h 03m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, second = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {second:02d}s"
    hours, minute = divmod(minutes, 60)
    return f"{hours}h {minute:02d}m"


def _unbilled(calls: dict[str, int]) -> str:
    """`3 other tool calls (calculator ×2, current_time): no cost reported`, a few names at most."""
    named = [
        shown_name(name) + (f" ×{count}" if count > 1 else "")
        for name, count in list(calls.items())[:UNBILLED_NAMES]
    ]
    more = ", …" if len(calls) > UNBILLED_NAMES else ""
    return f"{_count(sum(calls.values()), 'other tool call')} ({', '.join(named)}{more}): no cost reported"


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"
