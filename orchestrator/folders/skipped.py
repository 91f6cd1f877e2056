"""The one line a person reads about a tool folder that was skipped, and why.

Logged as `skipping tool folder PATH: REASON` (for logs and tests); the CLI
prints the record's `person_line` instead, without level or logger name:
`skipped sub_graphs/travel: tool_config.yaml line 3, column 34: ...`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from orchestrator.folders.untrusted import printable

SKIPPING = "skipping tool folder %s: %s"
PERSON_LINE = "person_line"  # the LogRecord attribute a handler may print alone


def report_skipped(
    logger: logging.Logger, path: Path, reason: str, *, sub_graphs_dir: Path
) -> None:
    """Log that the folder at `path` was skipped; its line names it from the top `sub_graphs`."""
    shown, why = printable(_below(path, sub_graphs_dir)), printable(" ".join(reason.split()))
    line = f"skipped {shown}: {why}"
    logger.warning(SKIPPING, printable(str(path)), printable(reason), extra={PERSON_LINE: line})


def _below(path: Path, sub_graphs_dir: Path) -> str:
    """`sub_graphs/travel` for a folder of the tree; the path itself for any other."""
    try:
        return path.relative_to(sub_graphs_dir.parent).as_posix()
    except ValueError:
        return str(path)
