"""Results too long for the model: kept whole by handle, per user, read back by range or search (issue 46)."""

from __future__ import annotations

import json
import uuid

import pytest
from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool, StructuredTool
from sqlalchemy import text

from orchestrator.dispatch.dispatcher import Dispatcher, default_middleware
from orchestrator.levels import Limits
from orchestrator.sources.result_reader import result_reader_tool
from orchestrator.store import Database
from orchestrator.store.large_results import KeepLimits
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.results import READ_RESULT_TOOL, ToolResult

LIMIT = 4000
LINES = 5000  # of 40 characters each: 200,000 characters and more once in JSON


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def big_text() -> str:
    """5,000 numbered lines, each line's number findable: 200,000 characters."""
    return "".join(f"line {n:05d} of the long report..........\n" for n in range(LINES))


def big_tool(content: str) -> BaseTool:
    async def report() -> ToolResult:
        return ToolResult(message=content)

    return StructuredTool.from_function(coroutine=report, name="report", description="A long report.")


def pipeline(content: str, *, keeping: KeepLimits | None = None, limit: int = LIMIT) -> Dispatcher:
    limits = Limits(max_iterations=3, max_result_chars=limit, timeout_seconds=60.0)
    tools = [big_tool(content), result_reader_tool(max_chars=limit)]
    return Dispatcher(tools, limits=limits, middleware=default_middleware(keeping=keeping))


def context(database: Database, user: str) -> RunContext:
    return RunContext(user_id=user, database=UserDatabase(database, user))


async def call(
    dispatcher: Dispatcher, run: RunContext, name: str, **args: object
) -> tuple[str, ToolResult]:
    """The model's text of one call, and its result."""
    tool_call = ToolCall(name=name, args=dict(args), id=f"call_{uuid.uuid4().hex[:12]}", type="tool_call")
    result = await dispatcher.dispatch(dispatcher.request(tool_call, run))
    message = dispatcher.message(tool_call, result)
    assert isinstance(message.content, str)
    return message.content, result


async def read_whole(dispatcher: Dispatcher, run: RunContext, handle: str) -> str:
    """The kept result read back range by range, each answer within the model's limit."""
    parts: list[str] = []
    offset: int | None = 0
    while offset is not None:
        shown, result = await call(dispatcher, run, READ_RESULT_TOOL, handle=handle, offset=offset)
        assert len(shown) <= LIMIT and result.status == "success", shown
        assert isinstance(result.data, dict)
        parts.append(str(result.data["text"]))
        next_offset = result.data["next_offset"]
        offset = next_offset if isinstance(next_offset, int) else None
    return "".join(parts)


async def test_a_200000_character_result_is_read_back_whole_by_range_and_only_by_its_user(
    database: Database,
):
    content = big_text()
    assert len(content) == 200_000
    dispatcher = pipeline(content)
    ann, bob = context(database, unique("ann")), context(database, unique("bob"))

    preview, result = await call(dispatcher, ann, "report")

    handle = result.handle
    assert handle is not None and handle.startswith("result:")
    whole = result.model_text()
    assert preview.startswith(whole[:LIMIT]), "the preview is the result's first part"
    assert f'call {READ_RESULT_TOOL} with handle "{handle}" and offset {LIMIT}' in preview
    assert "truncated" not in preview
    assert await read_whole(dispatcher, ann, handle) == whole
    assert json.loads(whole)["message"] == content
    _, past = await call(dispatcher, ann, READ_RESULT_TOOL, handle=handle, offset=len(whole) + 10)
    assert past.error_code == "invalid_arguments" and "past the end" in past.message

    refused, refusal = await call(dispatcher, bob, READ_RESULT_TOOL, handle=handle)
    assert refusal.status == "failure" and refusal.error_code == "result_not_found"
    assert content[:100] not in refused
    unknown, never = await call(dispatcher, ann, READ_RESULT_TOOL, handle="result:" + "0" * 32)
    assert never.error_code == "result_not_found"
    assert refused.replace(handle, "H") == unknown.replace("result:" + "0" * 32, "H"), "the same answer"
    async with database.user_transaction(bob.user_id) as connection:  # raw SQL, as bob
        seen = await connection.scalar(text("SELECT count(*) FROM large_results WHERE handle = :h"), {"h": handle})
    assert seen == 0


async def test_a_level_without_tool_data_keeps_what_its_model_reads_and_no_data(database: Database):
    secret = "4111-1111-1111-1111"

    async def report() -> ToolResult:
        return ToolResult(message=big_text(), data={"card": secret})

    tool = StructuredTool.from_function(coroutine=report, name="report", description="A report.")
    limits = Limits(max_iterations=3, max_result_chars=LIMIT, timeout_seconds=60.0, include_tool_data=False)
    dispatcher = Dispatcher([tool, result_reader_tool(max_chars=LIMIT)], limits=limits)
    ann = context(database, unique("ann"))

    preview, result = await call(dispatcher, ann, "report")

    assert result.handle is not None
    whole = await read_whole(dispatcher, ann, result.handle)
    assert whole == result.model_text(include_data=False), "the preview's offsets go on in it"
    assert preview.startswith(whole[:LIMIT]) and secret not in whole


async def test_a_search_finds_each_match_with_its_lines_and_says_where_to_go_on(database: Database):
    dispatcher = pipeline(big_text())
    ann = context(database, unique("ann"))
    _, result = await call(dispatcher, ann, "report")
    assert result.handle is not None

    shown, found = await call(dispatcher, ann, READ_RESULT_TOOL, handle=result.handle, pattern="line 04242", context_lines=1)
    assert found.status == "success" and len(shown) <= LIMIT, shown
    assert isinstance(found.data, dict)
    [match] = found.data["matches"]
    assert match["match"] == "line 04242" and match["line"] == 4243
    assert "line 04241" in match["context"] and "line 04243" in match["context"]
    assert "line 04240" not in match["context"] and "line 04244" not in match["context"]
    whole = result.model_text()
    assert whole[match["offset"] : match["offset"] + 10] == "line 04242"

    _, many = await call(dispatcher, ann, READ_RESULT_TOOL, handle=result.handle, pattern=r"line 0\d{3}7 ", regex=True)
    assert isinstance(many.data, dict)
    assert [m["match"] for m in many.data["matches"]][:2] == ["line 00007 ", "line 00017 "]
    next_offset = many.data["next_offset"]
    assert isinstance(next_offset, int), "500 matches do not fit one answer"
    _, rest = await call(dispatcher, ann, READ_RESULT_TOOL, handle=result.handle, pattern=r"line 0\d{3}7 ", regex=True, offset=next_offset)
    assert isinstance(rest.data, dict) and rest.data["matches"][0]["offset"] == next_offset

    _, bad = await call(dispatcher, ann, READ_RESULT_TOOL, handle=result.handle, pattern="(unclosed", regex=True)
    assert bad.error_code == "invalid_arguments" and "regular expression" in bad.message


async def test_a_search_says_at_most_20_matches_300_characters_each_side_and_stops_a_slow_pattern(
    database: Database,
):
    ann = context(database, unique("ann"))
    wide = pipeline(big_text(), limit=100_000)
    _, kept = await call(wide, ann, "report")
    assert kept.handle is not None
    _, many = await call(wide, ann, READ_RESULT_TOOL, handle=kept.handle, pattern="line ")
    assert isinstance(many.data, dict) and len(many.data["matches"]) == 20

    one_line = pipeline("x" * 10_000 + "NEEDLE" + "y" * 10_000)
    _, result = await call(one_line, ann, "report")
    assert result.handle is not None
    _, found = await call(one_line, ann, READ_RESULT_TOOL, handle=result.handle, pattern="NEEDLE")
    assert isinstance(found.data, dict)
    assert found.data["matches"][0]["context"] == "x" * 300 + "NEEDLE" + "y" * 300

    backtracking = pipeline("a" * 50_000 + "b")
    _, slow = await call(backtracking, ann, "report")
    assert slow.handle is not None
    _, stopped = await call(backtracking, ann, READ_RESULT_TOOL, handle=slow.handle, pattern="(a+)+$", regex=True)
    assert stopped.error_code == "invalid_arguments" and "took too long" in stopped.message


async def test_an_expired_result_is_not_found_and_the_next_write_purges_it(database: Database):
    dispatcher = pipeline(big_text(), keeping=KeepLimits(days=7))
    ann = context(database, unique("ann"))
    _, first = await call(dispatcher, ann, "report")
    assert first.handle is not None
    async with database.admin_transaction() as connection:
        days = await connection.scalar(
            text("SELECT extract(epoch FROM expires_at - created_at) / 86400 FROM large_results WHERE handle = :h"),
            {"h": first.handle},
        )
        assert round(float(days), 3) == 7.0, "kept for large_result_days"
        await connection.execute(
            text("UPDATE large_results SET expires_at = now() - interval '1 second' WHERE handle = :h"),
            {"h": first.handle},
        )

    _, expired = await call(dispatcher, ann, READ_RESULT_TOOL, handle=first.handle)
    assert expired.error_code == "result_not_found" and "expired" in expired.message

    _, second = await call(dispatcher, ann, "report")
    async with database.admin_transaction() as connection:
        left = await connection.scalars(
            text("SELECT handle FROM large_results WHERE user_id = :u"), {"u": ann.user_id}
        )
        assert list(left) == [second.handle]


async def test_past_the_size_limit_the_rest_is_dropped_and_the_model_is_told(database: Database):
    dispatcher = pipeline(big_text(), keeping=KeepLimits(max_bytes=50_000))
    ann = context(database, unique("ann"))

    preview, result = await call(dispatcher, ann, "report")

    assert result.handle is not None
    assert "only its first 50000 characters were kept" in preview
    whole = result.model_text()
    assert await read_whole(dispatcher, ann, result.handle) == whole[:50_000]
    _, past = await call(dispatcher, ann, READ_RESULT_TOOL, handle=result.handle, offset=60_000)
    assert past.error_code == "invalid_arguments" and "not kept" in past.message


async def test_a_result_that_fits_and_a_run_without_a_database_keep_nothing(database: Database):
    dispatcher = pipeline("short")
    ann = context(database, unique("ann"))
    _, small = await call(dispatcher, ann, "report")
    long = pipeline(big_text())
    cut, alone = await call(long, RunContext(user_id="nobody"), "report")

    assert small.handle is None and alone.handle is None
    assert "truncated" in cut and len(cut) < LIMIT + 300
    async with database.admin_transaction() as connection:
        count = await connection.scalar(text("SELECT count(*) FROM large_results WHERE user_id = :u"), {"u": ann.user_id})
    assert count == 0


@pytest.mark.parametrize("handle", ["result:nothing", "x"])
async def test_reading_without_a_database_is_one_clear_error(handle: str):
    dispatcher = pipeline("short")
    _, result = await call(dispatcher, RunContext(user_id="nobody"), READ_RESULT_TOOL, handle=handle)
    assert result.error_code == "not_configured" and "only with a database" in result.message
