"""The built-in `read_result` tool: the model reads on in a result kept by handle, or searches it.

A result too long for the model is kept whole under a handle (see
`dispatch.large_results`); the model saw its first part and the handle. This
tool reads a range of it (`offset`, `length` in characters) or finds a
substring or regular expression in it, with a few lines around each match.
Each answer fits the level's result size and says where to go on from
(`next_offset`). It reads in a transaction of the user of the call, under
row-level security: another user's handle is unknown, as is an expired one.
"""

from __future__ import annotations

import asyncio
import bisect
import json

import regex as _regex
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, JsonValue

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.store.large_results import ResultText, read_result
from orchestrator.tools.context import UserDatabase, current_context
from orchestrator.tools.results import READ_RESULT_TOOL, ToolResult

NOT_FOUND = (
    "No result {handle}: the handle is unknown or its result expired; run the tool again "
    "for a new one"
)
NO_DATABASE = "results are kept by handle only with a database"
PAST_END = "offset {offset} is past the end of {handle} ({length} characters)"
DROPPED = (
    "characters from {kept} on of {handle} were not kept (the result was over the size "
    "limit of results kept by handle)"
)
BAD_PATTERN = "the pattern is not a regular expression: {error}"
SLOW_PATTERN = "the regular expression took too long on this result; use a simpler one"
MAX_MATCHES = 20
CONTEXT_CHARS = 300  # the most of a line shown on each side of a match
PATTERN_SECONDS = 2.0
# A line ends at a newline, or at one written inside a JSON string (results are JSON).
LINE_END = _regex.compile(r"\n|\\n")
# What a read's answer costs beside the text itself (field names, numbers).
ANSWER_OVERHEAD = 400


class ReadResultArgs(BaseModel):
    handle: str = Field(min_length=1, description="The handle a cut result gave: result:<hex>.")
    offset: int = Field(
        default=0, ge=0, description="Where to start, in characters from the result's start."
    )
    length: int | None = Field(
        default=None,
        ge=1,
        description="How many characters to read (default and most: what one answer holds).",
    )
    pattern: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="Search instead of reading: the text to find from `offset` on; each "
        "match comes with its offset and the lines around it.",
    )
    regex: bool = Field(default=False, description="`pattern` is a regular expression.")
    context_lines: int = Field(default=2, ge=0, le=10, description="Lines shown around a match.")


def result_reader_tool(*, max_chars: int) -> BaseTool:
    """The reader of results kept by handle, whose answers fit in `max_chars` (the level's size)."""

    async def read(
        handle: str,
        offset: int = 0,
        length: int | None = None,
        pattern: str | None = None,
        regex: bool = False,
        context_lines: int = 2,
    ) -> ToolResult:
        database = _database()
        if pattern is not None:
            return await _search(
                database, handle, pattern, regex=regex, offset=offset, lines=context_lines,
                max_chars=max_chars,
            )
        return await _read(database, handle, offset=offset, length=length, max_chars=max_chars)

    return StructuredTool.from_function(
        coroutine=read,
        name=READ_RESULT_TOOL,
        description=(
            "Read on in a tool result that was too long and was cut: give its handle "
            "(result:<hex>) and an offset in characters, or a pattern to search it."
        ),
        args_schema=ReadResultArgs,
    )


def _database() -> UserDatabase:
    context = current_context()
    if context is None or context.database is None:
        raise ToolError(NO_DATABASE, code="not_configured", recoverable=False)
    return context.database


async def _fetched(
    database: UserDatabase, handle: str, *, offset: int, length: int | None
) -> ResultText:
    async with database.transaction() as connection:
        found = await read_result(connection, handle, offset=offset, length=length)
    if found is None:
        raise ToolError(NOT_FOUND.format(handle=handle), code="result_not_found", recoverable=False)
    if offset >= found.kept_chars and found.kept_chars < found.total_chars:
        raise InvalidToolArgumentsError(DROPPED.format(kept=found.kept_chars, handle=handle))
    if offset >= found.total_chars and offset > 0:
        raise InvalidToolArgumentsError(
            PAST_END.format(offset=offset, handle=handle, length=found.total_chars)
        )
    return found


async def _read(
    database: UserDatabase, handle: str, *, offset: int, length: int | None, max_chars: int
) -> ToolResult:
    room = max(max_chars - ANSWER_OVERHEAD, 1)
    found = await _fetched(database, handle, offset=offset, length=min(length or room, room))
    text = found.text
    answer = _answer(found, text)
    # JSON escapes lengthen the text (a quote is two characters): cut what does not fit.
    while (excess := len(answer.model_text()) - max_chars) > 0 and text:
        text = text[: max(len(text) - excess, 0)]
        answer = _answer(found, text)
    return answer


def _answer(found: ResultText, text: str) -> ToolResult:
    end = found.offset + len(text)
    data: dict[str, JsonValue] = {
        "offset": found.offset,
        "next_offset": end if end < found.kept_chars else None,
        "total_chars": found.total_chars,
        "text": text,
    }
    if found.kept_chars < found.total_chars:
        data["kept_chars"] = found.kept_chars
    left = found.kept_chars - end
    said = f"{left} more characters from offset {end}" if left > 0 else "the end of the result"
    return ToolResult(message=f"Characters {found.offset}-{end}; then {said}.", data=data)


async def _search(
    database: UserDatabase,
    handle: str,
    pattern: str,
    *,
    regex: bool,
    offset: int,
    lines: int,
    max_chars: int,
) -> ToolResult:
    compiled = _compiled(pattern, regex=regex)
    found = await _fetched(database, handle, offset=0, length=None)
    if offset > len(found.text):
        raise InvalidToolArgumentsError(
            PAST_END.format(offset=offset, handle=handle, length=len(found.text))
        )
    # On a thread: a regular expression may take its seconds (`regex` lets go of the GIL).
    matches, next_offset = await asyncio.to_thread(
        _matches, compiled, found.text, offset=offset, lines=lines, max_chars=max_chars
    )
    more = f"; more from offset {next_offset} (search again with that offset)" if next_offset else ""
    return ToolResult(
        message=f"{len(matches)} match(es) in {handle}{more}.",
        data={"matches": matches, "next_offset": next_offset, "total_chars": found.total_chars},
    )


def _matches(
    compiled: _regex.Pattern[str], text: str, *, offset: int, lines: int, max_chars: int
) -> tuple[list[JsonValue], int | None]:
    """The matches from `offset` on that fit one answer, and where the next one starts."""
    starts = [0, *(end.end() for end in LINE_END.finditer(text))]
    matches: list[JsonValue] = []
    try:
        for match in compiled.finditer(text, pos=offset, concurrent=True, timeout=PATTERN_SECONDS):
            shown = _match(text, starts, match.start(), match.end(), lines=lines)
            # The first match is always said, so that a search goes on from where it ends.
            if matches and (len(matches) == MAX_MATCHES or not _fits(matches, shown, max_chars)):
                return matches, match.start()
            matches.append(shown)
    except TimeoutError:
        raise InvalidToolArgumentsError(SLOW_PATTERN) from None
    return matches, None


def _compiled(pattern: str, *, regex: bool) -> _regex.Pattern[str]:
    try:
        return _regex.compile(pattern if regex else _regex.escape(pattern))
    except _regex.error as error:
        raise InvalidToolArgumentsError(BAD_PATTERN.format(error=error)) from None


def _match(text: str, starts: list[int], start: int, end: int, *, lines: int) -> dict[str, JsonValue]:
    """The match at `start`-`end` and the `lines` lines around it; the match and each side
    cut at CONTEXT_CHARS (a line of a JSON result may be all of it)."""
    line = bisect.bisect_right(starts, start) - 1
    after = line + lines + 1
    first = max(starts[max(line - lines, 0)], start - CONTEXT_CHARS)
    last = min(starts[after] if after < len(starts) else len(text), end + CONTEXT_CHARS)
    found = text[start:end]
    shown = found if len(found) <= CONTEXT_CHARS else found[:CONTEXT_CHARS] + "…"
    return {
        "offset": start,
        "end": end,
        "line": line + 1,
        "match": shown,
        "context": text[first:start] + shown + text[end:max(last, end)],
    }


def _fits(matches: list[JsonValue], more: dict[str, JsonValue], max_chars: int) -> bool:
    """Whether the answer with `more` stays within `max_chars`, beside its message."""
    return len(json.dumps([*matches, more], ensure_ascii=False)) + ANSWER_OVERHEAD <= max_chars
