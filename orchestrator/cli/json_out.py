"""JSON as the commands print it: numbers in fixed point, never in scientific notation.

Python writes a float below 1e-4 as `2e-05`: valid JSON, but a cost read by a person
(or by a shell script's `awk`) as 0.00002 should look like it.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

# A JSON string whole (so nothing inside one is touched), or a number with an exponent.
_STRING_OR_EXPONENT = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?[eE][-+]?\d+')


def dumps(body: object, *, ensure_ascii: bool = False) -> str:
    """`body` as one line of JSON, its numbers in fixed point."""
    text = json.dumps(body, ensure_ascii=ensure_ascii, default=str)
    return _STRING_OR_EXPONENT.sub(_fixed, text)


def _fixed(match: re.Match[str]) -> str:
    token = match.group()
    return token if token.startswith('"') else format(Decimal(token), "f")
