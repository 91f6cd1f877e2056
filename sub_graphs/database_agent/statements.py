"""What SQL a call holds: exactly one statement, and the word it starts with.

One statement per call is what lets the session's read-only rule and time limit hold: a
second statement could end the transaction (`COMMIT`) or change the session (`SET`). The
text is split by sqlparse, which knows quoted strings, identifiers, comments and
PostgreSQL's dollar quotes, so a `;` inside one of those does not count. The database is
the second guard: PostgreSQL gets each statement prepared (a prepared statement holds one
command) and Python's sqlite3 runs one statement at a time.
"""

from __future__ import annotations

import sqlparse
from sqlparse import tokens
from sqlparse.lexer import tokenize

from orchestrator.errors import InvalidToolArgumentsError, ToolError

MULTIPLE_STATEMENTS = (
    "database_agent runs one statement per call; this SQL holds {count} ({words}): "
    "send each statement in a call of its own"
)
NO_STATEMENT = "sql holds no statement, only comments or semicolons"
NOT_A_STATEMENT = (
    "syntax error: {word!r} does not start an SQL statement (SELECT, WITH, INSERT, UPDATE, "
    "...): check its spelling"
)
# Statements sqlparse reads as plain names, not keywords (the others it knows are keywords).
STATEMENT_NAMES = frozenset(
    {"pragma", "refresh", "release", "discard", "import", "optimize", "handler", "unlisten"}
)


def sole_statement(sql: str) -> str:
    """The first word (lower case) of the one statement `sql` holds.

    Raises `ToolError` (code `multiple_statements`) when it holds more than one, and
    `InvalidToolArgumentsError` when it holds none or its first word starts no statement (a
    misspelt `SELEC` is a syntax error, not a write).
    """
    firsts = [first for first in map(_first_word, sqlparse.split(sql)) if first[0]]
    words = [word for word, _ in firsts]
    if len(words) > 1:
        raise ToolError(
            MULTIPLE_STATEMENTS.format(
                count=len(words), words=", ".join(word.upper() for word in words)
            ),
            code="multiple_statements",
            recoverable=False,
        )
    if not firsts:
        raise InvalidToolArgumentsError(NO_STATEMENT)
    [(word, keyword)] = firsts
    if not keyword and word not in STATEMENT_NAMES:
        raise InvalidToolArgumentsError(NOT_A_STATEMENT.format(word=word))
    return word


def _first_word(statement: str) -> tuple[str, bool]:
    """The statement's first word (lower case), and whether SQL knows it as a keyword."""
    # Past whitespace, comments and punctuation (`;`, an opening parenthesis).
    for kind, value in tokenize(statement):
        if kind in tokens.Whitespace or kind in tokens.Comment or kind in tokens.Punctuation:
            continue
        return value.lower(), kind in tokens.Keyword
    return "", False
