"""The type checker's exceptions are few and said: each silenced error names its rule and why."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("orchestrator", "sub_graphs")  # what basedpyright checks (pyproject's `include`)

IGNORE = re.compile(r"#\s*(?:type|pyright):\s*ignore\b")
# `# pyright: ignore[reportRule, ...]` (or mypy's `# type: ignore[code]`)...
RULED = re.compile(
    r"#\s*(?:pyright:\s*ignore\[\s*report[A-Za-z]+(?:\s*,\s*report[A-Za-z]+)*\s*\]"
    r"|type:\s*ignore\[\s*[a-z-]+(?:\s*,\s*[a-z-]+)*\s*\])"
)
# ... then `  # why` after it, or the why in a comment of its own on the line above.
REASON_AFTER = re.compile(RULED.pattern + r"\s*#\s*\S")


def unsaid_ignores(source: str) -> list[int]:
    """The lines of `source` whose comment silences the checker without a rule and a reason."""
    comments = [
        token
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    alone = {token.start[0] for token in comments if token.line.strip().startswith("#")}
    return [
        token.start[0]
        for token in comments
        if IGNORE.search(token.string)
        and not (
            REASON_AFTER.search(token.string)
            or (RULED.search(token.string) and token.start[0] - 1 in alone)
        )
    ]


def test_an_ignore_without_its_rule_or_its_reason_is_found():
    source = (
        "a = 1  # type: ignore\n"
        "b = 2  # type: ignore[arg-type]\n"
        "c = 3  # pyright: ignore[reportCallIssue]\n"
        "d = 4  # pyright: ignore  # a reason but no rule\n"
        "e = 5  # pyright: ignore[reportCallIssue]  # the library's stub is wrong\n"
        "f = 6  # type: ignore[arg-type, misc]  # mypy's codes, and why\n"
        "g = 7  # pyright: ignore[reportCallIssue, reportArgumentType]  # why\n"
        "h = '# type: ignore'  # in a string: not a comment\n"
        "# why, on a line of its own above\n"
        "i = 8  # pyright: ignore[reportCallIssue]\n"
        "# a reason above an ignore that names no rule\n"
        "j = 9  # type: ignore\n"
    )

    assert unsaid_ignores(source) == [1, 2, 3, 4, 12]


def test_every_ignore_in_the_checked_code_names_its_rule_and_why():
    unsaid = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in CHECKED
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in unsaid_ignores(path.read_text(encoding="utf-8"))
    ]

    assert unsaid == [], (
        "write `# pyright: ignore[reportRule]  # why` (the rule it silences, and why):\n"
        + "\n".join(unsaid)
    )
