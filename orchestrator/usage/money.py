"""Dollar amounts as the CLI shows them."""

from __future__ import annotations


def usd(amount: float) -> str:
    """`amount` dollars in a few significant digits: $0.000195, $0.0123, $1.24."""
    if amount == 0:
        return "$0.00"
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount < 0.000001:
        return "<$0.000001"
    if amount < 0.01:
        return f"${amount:.3g}"
    text = f"{amount:.4f}".rstrip("0")
    return f"${text}" if len(text.partition(".")[2]) >= 2 else f"${amount:.2f}"
