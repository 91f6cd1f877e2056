"""The usage meter of a session: tokens and cost of its model calls and tool calls.

One meter serves a session's graph at every level (the run context carries
it down to nested agents), so each model call and each tool call is counted
once, where it happens. It keeps the current turn's totals beside the
session's, and says when a budget stops the turn.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from orchestrator.usage.billing import Billing
from orchestrator.usage.budget import Budgets, BudgetStop
from orchestrator.usage.prices import ModelIdentity, PriceTable
from orchestrator.usage.tokens import TokenCount


@dataclass
class ModelTotals:
    """One model's calls: how many, their tokens, what the priced ones cost, how long they took."""

    calls: int = 0
    tokens: TokenCount = field(default_factory=TokenCount)
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls no price is known for: their cost is not in `cost_usd`
    seconds: float = 0.0
    # Calls whose usage the server did not report (unpriced too), and what budgets count for them.
    unreported_calls: int = 0
    estimated_usd: float = 0.0

    def add(self, tokens: TokenCount, cost_usd: float | None, seconds: float) -> None:
        self.calls += 1
        self.tokens = self.tokens + tokens
        self.seconds += seconds
        if cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += cost_usd

    def add_unreported(self, estimated_usd: float | None, seconds: float) -> None:
        """A call whose usage is unknown: its cost is unknown, its estimate held for budgets."""
        self.add(TokenCount(), None, seconds)
        self.unreported_calls += 1
        self.estimated_usd += estimated_usd or 0.0

    @property
    def priced(self) -> bool:
        """Whether every call's price is known."""
        return self.unpriced_calls == 0

    def to_json(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            **self.tokens.to_json(),
            "cost_usd": self.cost_usd if self.priced else None,
            "usage_unreported_calls": self.unreported_calls,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class ToolTotals:
    """One tool's calls and what the tool said they cost."""

    calls: int = 0
    cost_usd: float = 0.0
    credits: float = 0.0

    def add(self, billing: Billing | None) -> None:
        self.calls += 1
        if billing is not None:
            self.cost_usd += billing.total_cost_usd
            self.credits += billing.credits or 0.0

    def to_json(self) -> dict[str, object]:
        return {"calls": self.calls, "cost_usd": self.cost_usd, "credits": self.credits}


@dataclass
class Totals:
    """Usage of a turn or a session, by model and by tool."""

    models: dict[str, ModelTotals] = field(default_factory=lambda: defaultdict(ModelTotals))
    tools: dict[str, ToolTotals] = field(default_factory=lambda: defaultdict(ToolTotals))

    @property
    def tokens(self) -> TokenCount:
        """Every model call's tokens together."""
        return sum((m.tokens for m in self.models.values()), TokenCount())

    @property
    def model_cost_usd(self) -> float:
        """What the priced model calls cost."""
        return sum(m.cost_usd for m in self.models.values())

    @property
    def tool_cost_usd(self) -> float:
        """What the tools said their calls cost."""
        return sum(t.cost_usd for t in self.tools.values())

    @property
    def credits(self) -> float:
        """The credits the tools said their calls used."""
        return sum(t.credits for t in self.tools.values())

    @property
    def cost_usd(self) -> float:
        """Everything known to have been spent: priced model calls and billed tool calls."""
        return self.model_cost_usd + self.tool_cost_usd

    @property
    def estimated_usd(self) -> float:
        """What the calls with unreported usage cost, estimated high (not in `cost_usd`)."""
        return sum(m.estimated_usd for m in self.models.values())

    @property
    def budget_usd(self) -> float:
        """What budgets count as spent: the known cost and the estimates of unreported calls."""
        return self.cost_usd + self.estimated_usd

    @property
    def unreported_models(self) -> list[str]:
        """The models with calls whose usage the server did not report."""
        return sorted(name for name, m in self.models.items() if m.unreported_calls)

    @property
    def unpriced_models(self) -> list[str]:
        """The models with calls no price is known for."""
        return sorted(name for name, m in self.models.items() if not m.priced)

    @property
    def priced(self) -> bool:
        """Whether the price of every call is known (`cost_usd` is then the whole cost)."""
        return not self.unpriced_models

    def merge(self, other: Totals) -> None:
        """Add `other`'s counts to these."""
        for name, model in other.models.items():
            mine = self.models[name]
            mine.calls += model.calls
            mine.tokens = mine.tokens + model.tokens
            mine.cost_usd += model.cost_usd
            mine.unpriced_calls += model.unpriced_calls
            mine.seconds += model.seconds
            mine.unreported_calls += model.unreported_calls
            mine.estimated_usd += model.estimated_usd
        for name, tool in other.tools.items():
            ours = self.tools[name]
            ours.calls += tool.calls
            ours.cost_usd += tool.cost_usd
            ours.credits += tool.credits

    def to_json(self) -> dict[str, object]:
        """The totals as `ask --json` and `usage --json` show them."""
        return {
            "tokens": self.tokens.to_json(),
            "models": {name: m.to_json() for name, m in sorted(self.models.items())},
            "tools": {name: t.to_json() for name, t in sorted(self.tools.items())},
            "model_cost_usd": self.model_cost_usd,
            "tool_cost_usd": self.tool_cost_usd,
            "credits": self.credits,
            "price_unknown": self.unpriced_models,
            "usage_unreported": self.unreported_models,
        }


class UsageMeter:
    """Counts a session's model and tool calls, prices them, and holds its budgets.

    `turn` restarts with each turn (`start_turn`); `session` holds what the
    session spent, in this process and, once `seed`ed from the request log,
    before it. `stop` is the budget stop of the current turn, if one came.
    """

    def __init__(self, *, prices: PriceTable | None = None, budgets: Budgets | None = None) -> None:
        self.prices = prices or PriceTable()
        self.budgets = budgets or Budgets()
        self.session = Totals()
        self.turn = Totals()
        self.turn_id: str | None = None
        self.stop: BudgetStop | None = None
        self.started = time.monotonic()
        self._reserved = 0.0  # the caps of tool calls running now, counted as spent

    def start_turn(self, turn_id: str | None = None) -> None:
        """Begin counting a new turn (the session's totals go on)."""
        self.turn = Totals()
        self.turn_id = turn_id
        self.stop = None
        self._reserved = 0.0

    def seed(self, stored: Totals) -> None:
        """Count what the session spent before this process (from the request log)."""
        self.session.merge(stored)

    def price(
        self, identity: ModelIdentity, tokens: TokenCount, *, model: str | None = None
    ) -> float | None:
        """What `tokens` cost on that model (None: no price known)."""
        return self.prices.cost(identity, tokens, model=model)

    def add_model(
        self, model: str, tokens: TokenCount, cost_usd: float | None, *, seconds: float
    ) -> None:
        """Count one model call of `model`."""
        for totals in (self.turn, self.session):
            totals.models[model].add(tokens, cost_usd, seconds)

    def add_unreported(self, model: str, estimated_usd: float | None, *, seconds: float) -> None:
        """Count one call of `model` whose usage is unknown; budgets count `estimated_usd`."""
        for totals in (self.turn, self.session):
            totals.models[model].add_unreported(estimated_usd, seconds)

    def add_tool(self, name: str, billing: Billing | None) -> None:
        """Count one finished call of tool `name`, and what it cost if its tool said."""
        for totals in (self.turn, self.session):
            totals.tools[name].add(billing)

    def before_model(self, upcoming_usd: float = 0.0) -> BudgetStop | None:
        """The stop, if the turn must end before a model call that costs at least `upcoming_usd`."""
        if self.stop is None:
            self.stop = self._check(upcoming_usd)
        return self.stop

    def before_tool(self, cap_usd: float | None) -> BudgetStop | None:
        """The stop, if a tool call must not start; else its cap is held until `release`."""
        if self.stop is None:
            self.stop = self._check(cap_usd or 0.0)
        if self.stop is None:
            self._reserved += cap_usd or 0.0
        return self.stop

    def release(self, cap_usd: float | None) -> None:
        """A call that held its cap (`before_tool`) has ended or been handed over."""
        self._reserved = max(self._reserved - (cap_usd or 0.0), 0.0)

    def count_tool(self, name: str, billing: Billing | None, *, cap_usd: float | None) -> None:
        """Count a call that ran; one billed more than its tool's cap stops the turn."""
        self.add_tool(name, billing)
        cost = billing.total_cost_usd if billing is not None else 0.0
        if cap_usd is not None and cost > cap_usd and self.stop is None:
            self.stop = BudgetStop(
                budget=f"max_cost_usd of {name}", limit_usd=cap_usd, spent_usd=cost, scope=name
            )

    def _check(self, upcoming: float) -> BudgetStop | None:
        return self.budgets.check(
            turn=self.turn.budget_usd,
            session=self.session.budget_usd,
            upcoming=upcoming + self._reserved,
            turn_estimated=self.turn.estimated_usd,
            session_estimated=self.session.estimated_usd,
        )

    @property
    def elapsed_seconds(self) -> float:
        """How long this meter has been counting (the session's time in this process)."""
        return time.monotonic() - self.started
