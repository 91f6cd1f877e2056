"""Text shown to the person: untrusted text made printable, one line, a path."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from orchestrator.folders.untrusted import printable


def one_line(text: str, limit: int = 100) -> str:
    """`text` flattened to one line of at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def shown(text: str) -> str:
    """Untrusted text as rich markup that prints verbatim, on one line.

    No markup, and no control or format characters (escape sequences, newlines,
    bidirectional overrides): each is written as its escape, e.g. `\\x1b`.
    """
    return escape(printable(text))
