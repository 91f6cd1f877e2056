"""A small chart of time against size for the scale benchmarks (`--plot FILE.png`).

matplotlib is a dev dependency; it is imported only when a chart is asked for,
and drawn without a screen (the Agg backend).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def plot_curves(
    path: Path,
    *,
    title: str,
    sizes: Sequence[float],
    series: Mapping[str, Sequence[float]],
    xlabel: str,
    ylabel: str,
    log_x: bool = True,
) -> None:
    """One line per series (ours, the peer's) over `sizes`, saved as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(6, 4), dpi=100)
    for label, values in series.items():
        axes.plot(sizes[: len(values)], values, marker="o", label=label)
    if log_x:
        axes.set_xscale("log")
    axes.set_xticks(list(sizes), [f"{size:,.0f}" for size in sizes])
    axes.set_ylim(bottom=0)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    print(f"chart: {path}")
