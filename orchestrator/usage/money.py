"""Dollar amounts as the CLI shows them: fixed-point, never scientific notation."""

from __future__ import annotations

import math

SIGNIFICANT = 3  # digits kept of an amount under a cent
SMALLEST = 0.000001  # below this, only that it is below


def usd(amount: float) -> str:
    """`amount` dollars in a few significant digits: $0.0000045, $0.000195, $0.0123, $1.24."""
    if amount == 0:
        return "$0.00"
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount < SMALLEST:
        return f"< ${SMALLEST:.6f}"
    if amount < 0.01:
        # As many decimals as SIGNIFICANT digits need: `:.3g` would write 4.5e-06.
        decimals = SIGNIFICANT - 1 - math.floor(math.log10(amount))
        return f"${amount:.{decimals}f}".rstrip("0").rstrip(".")
    text = f"{amount:.4f}".rstrip("0")
    return f"${text}" if len(text.partition(".")[2]) >= 2 else f"${amount:.2f}"
