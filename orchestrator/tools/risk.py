"""How risky a call the person is asked about is, and how soon it wants an answer.

Every question (see `hitl.Question`) carries a `risk_level` and an `urgency`,
shown at the question, in `ask --json` and in the request log with the
decision. They come from the action's folder (`risk_level`, `urgency` and
`action_risk` in its `tool_config.yaml`), else from the action's author
(`@action(risk_level=..., urgency=...)`), else from the call that asks
(`request_authorization`'s arguments), else the defaults below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypedDict

RiskLevel = Literal["low", "medium", "high", "critical"]
Urgency = Literal["low", "normal", "high"]

RISK_LEVELS: tuple[RiskLevel, ...] = ("low", "medium", "high", "critical")
URGENCIES: tuple[Urgency, ...] = ("low", "normal", "high")
DEFAULT_RISK: Final[RiskLevel] = "medium"
DEFAULT_URGENCY: Final[Urgency] = "normal"

# The keys of a tool's metadata that hold them (None: not said).
RISK_KEY: Final = "risk_level"
URGENCY_KEY: Final = "urgency"


class Risk(TypedDict):
    """A question's risk level and urgency."""

    risk_level: RiskLevel
    urgency: Urgency


def risk_of(metadata: Mapping[str, object] | None) -> Risk:
    """What a tool's `metadata` says (see `folders.risk_marks`), else the defaults."""
    metadata = metadata or {}
    return Risk(
        risk_level=_risk_level(metadata.get(RISK_KEY)), urgency=_urgency(metadata.get(URGENCY_KEY))
    )


def _risk_level(value: object) -> RiskLevel:
    for level in RISK_LEVELS:
        if value == level:
            return level
    return DEFAULT_RISK


def _urgency(value: object) -> Urgency:
    for urgency in URGENCIES:
        if value == urgency:
            return urgency
    return DEFAULT_URGENCY
