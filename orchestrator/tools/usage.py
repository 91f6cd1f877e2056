"""What the calls of a run cost, as their tools report it (a result's `billing`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from orchestrator.tools.results import Billing


@dataclass
class UsageMeter:
    """Adds up tool billing per tool name for one run context (a session, say)."""

    tool_cost_usd: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: int = 0

    def add_tool(self, name: str, billing: Billing | None) -> None:
        """Count one finished call of `name`, and what it cost if its tool said."""
        self.calls += 1
        if billing is not None:
            self.tool_cost_usd[name] += billing.total_cost_usd

    @property
    def total_tool_cost_usd(self) -> float:
        """What every counted call cost together."""
        return sum(self.tool_cost_usd.values())
