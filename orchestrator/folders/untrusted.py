"""Text from a tool folder (names, descriptions, paths, errors) made safe to print.

A folder's text must never move the cursor, recolour or clear the terminal,
reverse the reading order, or start a line of its own that looks like ours.
"""

from __future__ import annotations

import re

# A name is shown up to this many characters: a model may send any length.
NAME_CHARS = 60
# Text from a model must not move the cursor or recolour the terminal.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every non-printable character written as its escape (`\\x1b`, `\\n`, `\\u202e`).

    Non-printable is Python's notion: control characters (newlines and tabs too),
    format characters such as the bidirectional overrides, and separators other
    than the plain space.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escaped(char) for char in text)


def _escaped(char: str) -> str:
    return repr(char)[1:-1]


def shown_name(name: str) -> str:
    """A tool or model name as one short line: control characters replaced, long names cut."""
    name = _CONTROL.sub("?", name[: NAME_CHARS + 1])
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"
