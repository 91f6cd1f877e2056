"""A turn drawn as a timeline: each model and tool call a bar on one time axis, under its caller."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape

from orchestrator.store.timeline import TimelineRow
from orchestrator.terminal.text import shown
from orchestrator.tools.request_status import RequestStatus

BAR_WIDTH = 40
LABEL_WIDTH = 34
MIN_BAR = 10  # narrower, the bars show no more than their order
MIN_LABEL = 12
COLUMNS = 80
COLOURS = {"model": "cyan", "tool": "magenta"}


def waterfall(
    rows: Sequence[TimelineRow], *, columns: int = COLUMNS, width: int | None = None
) -> list[str]:
    """Lines of rich markup, the calls in tree order (each level by start): bars share the axis.

    The lines fit `columns`: the bars (`width`, if given) and then the labels give way,
    never the figures (time, tokens, cost) at the end of each line.
    """
    if not rows:
        return []
    start = min(row.start for row in rows)
    total = max((max(row.end for row in rows) - start).total_seconds(), 1e-6)
    ordered = _tree(rows)
    figures = {id(row): _figures(row) for _, row in ordered}
    room = columns - 2 - max(len(line) for line in [*figures.values(), f"{total:.2f}s"])
    label_width = LABEL_WIDTH
    if width is None:
        width = max(MIN_BAR, min(BAR_WIDTH, room - label_width))
        label_width = max(MIN_LABEL, min(LABEL_WIDTH, room - width))
    lines = [f"[dim]{'':<{label_width}} 0{'':<{width - 1}}{total:.2f}s[/dim]"]
    for depth, row in ordered:
        offset = min(width - 1, int(width * (row.start - start).total_seconds() / total))
        length = max(1, min(width - offset, round(width * row.seconds / total)))
        bar = f"[{COLOURS[row.kind]}]{'█' * length}[/{COLOURS[row.kind]}]"
        label = shown(f"{'  ' * depth}{row.kind} {row.name}")[:label_width]
        cells = f"{' ' * offset}{bar}{' ' * (width - offset - length)}"
        padding = " " * (label_width - len(label))
        lines.append(f"{escape(label)}{padding} {cells} {escape(figures[id(row)])}")
    return lines


def _figures(row: TimelineRow) -> str:
    """The row's time, tokens, cost and an unusual status, as plain text."""
    parts = [f"{row.seconds:.2f}s"]
    if row.input_tokens or row.output_tokens:
        parts.append(f"{row.input_tokens}+{row.output_tokens} tokens")
    if row.cost_usd:
        parts.append(f"${row.cost_usd:.4f}")
    if row.status and row.status not in ("success", RequestStatus.CLOSED, RequestStatus.COMPLETED):
        parts.append(shown(row.status))
    return "  ".join(parts)


def _tree(rows: Sequence[TimelineRow]) -> list[tuple[int, TimelineRow]]:
    """(depth, row) depth first: a call's children (by start) right after it."""
    tools = {row.request_id for row in rows if row.kind == "tool"}
    children: dict[str | None, list[TimelineRow]] = {}
    for row in rows:
        parent = row.parent_request_id if row.parent_request_id in tools else None
        children.setdefault(parent, []).append(row)
    ordered: list[tuple[int, TimelineRow]] = []
    pending = [(0, row) for row in reversed(children.get(None, []))]
    while pending:
        depth, row = pending.pop()
        ordered.append((depth, row))
        if row.kind == "tool":
            pending.extend(
                (depth + 1, child) for child in reversed(children.get(row.request_id, []))
            )
    return ordered
