"""What a tool call cost, as its tool reports it (`ToolResult.billing`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Billing(BaseModel):
    """What a call cost, when the tool knows: in dollars, and in the service's credits if any."""

    total_cost_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    credits: float | None = Field(default=None, ge=0, allow_inf_nan=False)
