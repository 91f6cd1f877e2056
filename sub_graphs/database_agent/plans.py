"""EXPLAIN of a statement without running it: the words each dialect needs, the plan as lines.

PostgreSQL's `EXPLAIN (FORMAT TEXT)` takes options in parentheses, so SQL that begins with
`ANALYZE` is a syntax error there, never `EXPLAIN ANALYZE`, which would run the statement.
SQLite's `EXPLAIN QUERY PLAN` names each step with its parent: the lines are indented by it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

PREFIXES = {"postgresql": "EXPLAIN (FORMAT TEXT) ", "sqlite": "EXPLAIN QUERY PLAN "}
DEFAULT_PREFIX = "EXPLAIN "
# SQLite's columns of EXPLAIN QUERY PLAN.
SQLITE_STEP = ("id", "parent", "detail")


def explained(dialect: str, sql: str) -> str:
    """`sql` behind the EXPLAIN that shows its plan on `dialect` without running it."""
    return PREFIXES.get(dialect, DEFAULT_PREFIX) + sql


def plan_lines(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """The plan as text lines: PostgreSQL's as it is, SQLite's steps indented under their parent,
    any other (MySQL's table) a line a row, `column: value, ...`."""
    if len(columns) == 1:
        return [str(row[0]) for row in rows]
    if all(name in columns for name in SQLITE_STEP):
        return _tree([dict(zip(columns, row, strict=True)) for row in rows])
    return [
        ", ".join(f"{name}: {value}" for name, value in zip(columns, row, strict=True))
        for row in rows
    ]


def _tree(steps: Sequence[Mapping[str, object]]) -> list[str]:
    depth: dict[object, int] = {}
    lines: list[str] = []
    for step in steps:  # SQLite lists each parent before its children
        level = depth.get(step["parent"], -1) + 1
        depth[step["id"]] = level
        lines.append("  " * level + str(step["detail"]))
    return lines
