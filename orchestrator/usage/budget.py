"""Budgets: how much a turn or a session may spend, and the stop when one would be passed."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.usage.money import usd

TURN_BUDGET = "ORCHESTRATOR_MAX_TURN_COST_USD"
SESSION_BUDGET = "ORCHESTRATOR_MAX_SESSION_COST_USD"
ESTIMATED = (
    "{amount} of it estimated from the text of model calls whose server did not report "
    "their usage"
)


@dataclass(frozen=True)
class BudgetStop:
    """Why a turn stopped: the budget (its setting), its limit, and what was spent."""

    budget: str
    limit_usd: float
    spent_usd: float
    scope: str  # "turn", "session", or the tool whose call cost more than its cap
    estimated_usd: float = 0.0  # of `spent_usd`: estimates for calls whose usage was not reported

    @property
    def message(self) -> str:
        """What the person and the model are told, as the turn's answer."""
        if self.scope in ("turn", "session"):
            what = f"this {self.scope} has spent {usd(self.spent_usd)}"
            if self.estimated_usd:
                what += f" ({ESTIMATED.format(amount=usd(self.estimated_usd))})"
            return (
                f"Stopped before passing the {self.scope} budget of {usd(self.limit_usd)} "
                f"({self.budget}): {what}. No further model or tool calls were made."
            )
        return (
            f"Stopped: one call of {self.scope} cost {usd(self.spent_usd)}, over its "
            f"max_cost_usd of {usd(self.limit_usd)} ({self.budget}). "
            "No further model or tool calls were made."
        )

    def to_json(self) -> dict[str, object]:
        """The stop as `ask --json` shows it."""
        return {
            "budget": self.budget,
            "scope": self.scope,
            "limit_usd": self.limit_usd,
            "spent_usd": self.spent_usd,
            "estimated_usd": self.estimated_usd,
            "message": self.message,
        }


@dataclass(frozen=True)
class Budgets:
    """The turn's and the session's spending limits in dollars (None: no limit)."""

    max_turn_cost_usd: float | None = None
    max_session_cost_usd: float | None = None

    @property
    def any(self) -> bool:
        """Whether a budget is set."""
        return self.max_turn_cost_usd is not None or self.max_session_cost_usd is not None

    def check(
        self,
        *,
        turn: float,
        session: float,
        upcoming: float = 0.0,
        turn_estimated: float = 0.0,
        session_estimated: float = 0.0,
    ) -> BudgetStop | None:
        """The stop, if spending `upcoming` more after `turn` and `session` would pass a budget.

        A budget already reached stops too: the next call, whatever it costs,
        passes it. `turn_estimated` and `session_estimated` are the parts of
        `turn` and `session` that are estimates (the stop says so).
        """
        limits = (
            (self.max_turn_cost_usd, turn, turn_estimated, TURN_BUDGET, "turn"),
            (self.max_session_cost_usd, session, session_estimated, SESSION_BUDGET, "session"),
        )
        for limit, spent, estimated, setting, scope in limits:
            if limit is not None and (spent >= limit or spent + upcoming > limit):
                return BudgetStop(
                    budget=setting,
                    limit_usd=limit,
                    spent_usd=spent,
                    scope=scope,
                    estimated_usd=estimated,
                )
        return None
