"""Usage and cost: tokens of every model call, tool billing, prices, totals and budgets."""
