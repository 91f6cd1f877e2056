"""JSON as the commands print it: numbers in fixed point, never in scientific notation.

Python writes a float below 1e-4 as `2e-05`: valid JSON, but a cost read by a person
(or by a shell script's `awk`) as 0.00002 should look like it. A command that prints
one JSON object (`ask --json`) keeps standard output for it alone (`stdout_to_stderr`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout, suppress
from decimal import Decimal
from io import UnsupportedOperation

# A JSON string whole (so nothing inside one is touched), or a number with an exponent.
_STRING_OR_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?[eE][-+]?\d+')


def dumps(body: object, *, ensure_ascii: bool = False) -> str:
    """`body` as one line of JSON, its numbers in fixed point."""
    text = json.dumps(body, ensure_ascii=ensure_ascii, default=str)
    return _STRING_OR_EXPONENT.sub(_fixed, text)


def _fixed(match: re.Match[str]) -> str:
    token = match.group()
    return token if token.startswith('"') else format(Decimal(token), "f")


@contextmanager
def stdout_to_stderr() -> Iterator[Callable[[dict[str, object]], None]]:
    """Send everything written to stdout to stderr; yield a printer of JSON to the real stdout.

    At the file-descriptor level when stdout is a real file, so that what a
    tool's subprocess or C code writes moves too; else (stdout replaced, as
    under a test runner) at the level of `sys.stdout`.
    """
    real = sys.stdout
    real.flush()
    saved = _moved_descriptor()

    def print_json(body: dict[str, object]) -> None:
        line = dumps(body) + "\n"
        if saved is None:
            real.write(line)
            real.flush()
            return
        data = line.encode(real.encoding or "utf-8", errors="backslashreplace")
        while data:
            data = data[os.write(saved, data):]

    try:
        with redirect_stdout(sys.stderr):
            yield print_json
    finally:
        if saved is not None:
            with suppress(OSError, ValueError):
                sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def _moved_descriptor() -> int | None:
    """Point file descriptor 1 at stderr; a copy of the old one (None if stdout is no real file)."""
    try:
        if sys.stdout.fileno() != 1:
            return None
    except (UnsupportedOperation, AttributeError, ValueError):
        return None
    saved = os.dup(1)
    os.dup2(2, 1)
    return saved
