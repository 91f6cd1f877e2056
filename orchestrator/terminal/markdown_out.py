"""Answers as Markdown on a terminal: streamed text printed a finished block at a time.

A block ends at a blank line outside a code fence, so each one printed is
complete Markdown (a paragraph, a list, a whole fenced block) and is never
printed twice. Lines are wrapped at word boundaries to the terminal's width.
"""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown

FENCES = ("```", "~~~")


class MarkdownBlocks:
    """Cuts streamed text into finished Markdown blocks."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        """The blocks `text` finished; the rest waits for more."""
        self._pending += text
        blocks: list[str] = []
        start = 0
        in_fence = False
        position = 0
        lines = self._pending.split("\n")
        for number, line in enumerate(lines[:-1]):  # the last line is not finished yet
            position += len(line) + 1
            if line.lstrip().startswith(FENCES):
                in_fence = not in_fence
            ended = not line.strip() and not in_fence and number > 0
            if ended and self._pending[start : position].strip():
                blocks.append(self._pending[start:position].strip("\n"))
                start = position
        self._pending = self._pending[start:]
        return blocks

    def rest(self) -> str:
        """What is left: the last block, finished by the end of the reply."""
        rest, self._pending = self._pending.strip("\n"), ""
        return rest


def print_markdown(console: Console, text: str) -> None:
    """`text` rendered as Markdown, wrapped at word boundaries to the console's width."""
    # "default": lines not padded with spaces to the full width (copied text stays clean)
    console.print(Markdown(text, justify="default"), soft_wrap=False)
