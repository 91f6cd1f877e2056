"""Usage in the request log: kept per request, summed per session and user, and `orchestrator usage`."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.store.engine import Database
from orchestrator.store.requests import RequestLog
from orchestrator.store.usage_log import session_totals, usage_report
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, Usage
from orchestrator.usage.records import UsageRecord
from orchestrator.usage.tokens import TokenCount
from tests.helpers import server_env


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


LOCAL_PRICES = json.dumps({"local-llm": {"input": 1.0, "output": 2.0}})  # $ per million


def record(user: str, session: str, name: str, cost: float | None, **fields: object) -> UsageRecord:
    values: dict[str, object] = {
        "request_id": unique("r"),
        "parent_request_id": None,
        "session_id": session,
        "user_id": user,
        "turn_id": "t1",
        "kind": "model",
        "name": name,
        "tokens": TokenCount(input=100, output=10, cached_input=40, reasoning=3),
        "cost_usd": cost,
        "seconds": 0.5,
    }
    return UsageRecord(**{**values, **fields})  # type: ignore[arg-type]


async def keep(database: Database, *records: UsageRecord) -> None:
    log = RequestLog(database)
    for one in records:
        await log.used(one)


async def test_a_sessions_totals_count_priced_and_unpriced_calls_and_billed_tools(
    database: Database,
):
    ann, session = unique("ann"), unique("s")
    await keep(
        database,
        record(ann, session, "gpt-4o-mini", 0.001),
        record(ann, session, "gpt-4o-mini", 0.002),
        record(ann, session, "my-llm", None),
        record(ann, session, "my-llm", 0.5),  # a price was set later
        record(
            ann, session, "search", None, kind="tool", tokens=TokenCount(), cost_usd=0.03, credits=2
        ),
        record(ann, unique("other"), "gpt-4o-mini", 7.0),
        record(unique("bob"), session, "gpt-4o-mini", 9.0),
    )

    totals = await session_totals(database, session, user_id=ann)

    hosted, local = totals.models["gpt-4o-mini"], totals.models["my-llm"]
    assert (hosted.calls, hosted.cost_usd, hosted.unpriced_calls) == (2, pytest.approx(0.003), 0)
    assert hosted.tokens == TokenCount(input=200, output=20, cached_input=80, reasoning=6)
    assert (local.calls, local.cost_usd, local.unpriced_calls) == (2, 0.5, 1)
    assert totals.unpriced_models == ["my-llm"], "a call with no price is unknown, not free"
    search = totals.tools["search"]
    assert (search.calls, search.cost_usd, search.credits) == (1, 0.03, 2)
    assert totals.cost_usd == pytest.approx(0.533), "another session's and another user's left out"


async def test_a_users_report_is_per_utc_day_from_the_day_asked(database: Database):
    ann = unique("ann")
    old, new = record(ann, "s1", "gpt-4o-mini", 0.25), record(ann, "s2", "gpt-4o-mini", 0.5)
    await keep(database, old, new, record(unique("bob"), "s3", "gpt-4o-mini", 9.0))
    async with database.user_transaction(ann) as connection:
        await connection.execute(
            text(
                "UPDATE request_usage SET created_at = now() - interval '2 days' WHERE request_id = :r"
            ),
            {"r": old.request_id},
        )
    today = datetime.now(UTC).date()

    everything = await usage_report(database, user_id=ann)
    recent = await usage_report(database, user_id=ann, since=today - timedelta(days=1))

    assert list(everything.days) == [today - timedelta(days=2), today]
    assert everything.total.cost_usd == pytest.approx(0.75)
    assert everything.to_json()["total"]["cost_usd"] == pytest.approx(0.75)
    assert list(recent.days) == [today] and recent.total.cost_usd == 0.5


# --- end to end --------------------------------------------------------------------------------


def local_reply(reply: str) -> RawReply:
    return RawReply(text=reply, usage=Usage(1_000, 500), model="local-llm")


def priced_env(server: OpenAICompatibleServer, **extra: str) -> dict[str, str]:
    return {**server_env(server), "ORCHESTRATOR_MODEL_PRICES": LOCAL_PRICES, **extra}


def test_a_continued_session_counts_what_it_spent_before_against_its_budget(cli, tmp_path: Path):
    user, session = unique("u"), unique("s")
    ask = ("ask", "--user", user, "--session", session)
    with OpenAICompatibleServer([local_reply("One."), local_reply("Two.")]) as server:
        first = cli(*ask, "first", cwd=tmp_path, env_extra=priced_env(server))
        budget = {"ORCHESTRATOR_MAX_SESSION_COST_USD": "0.002"}  # the first turn spent $0.002
        second = cli(*ask, "second", cwd=tmp_path, env_extra=priced_env(server, **budget))

    assert first.returncode == 0, first.stderr
    assert second.returncode == 3, "a budget stop is no success (issue 27, item 15)"
    assert len(server.requests) == 1, "no model call once the session's budget is spent"
    assert second.stdout.startswith("Stopped before passing the session budget of $0.002")


def test_usage_prints_tokens_and_cost_per_day_and_model(cli, tmp_path: Path):
    user = unique("u")
    replies = [local_reply("One."), RawReply(text="Two.", usage=Usage(30, 3), model="mystery")]
    with OpenAICompatibleServer(replies) as server:
        for question in ("first", "second"):
            done = cli("ask", "--user", user, question, cwd=tmp_path, env_extra=priced_env(server))
            assert done.returncode == 0, done.stderr

    shown = cli("usage", "--user", user, cwd=tmp_path)
    as_json = cli("usage", "--user", user, "--json", cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    today = datetime.now(UTC).date().isoformat()
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert [today, "local-llm", "1", "1,000", "0", "500", "0", "$0.002"] in lines
    assert ["mystery", "1", "30", "0", "3", "0", "price", "unknown"] in lines
    [total] = [line for line in shown.stdout.splitlines() if line.startswith("total:")]
    assert total == (
        "total: 1,030 tokens in, 503 out · $0.002 (models $0.002, tools $0.00) · "
        "price unknown for mystery"
    )
    body = json.loads(as_json.stdout)
    assert body["days"][today]["models"]["mystery"]["cost_usd"] is None
    assert body["total"]["cost_usd"] is None, "a price is unknown: no total, as in ask --json"
    assert body["total"]["model_cost_usd"] == pytest.approx(0.002), "what is known"
    assert body["total"]["price_unknown"] == ["mystery"]


def test_usage_since_a_later_day_and_a_bad_day(cli, tmp_path: Path):
    tomorrow = (date.today() + timedelta(days=2)).isoformat()

    nothing = cli("usage", "--user", unique("u"), "--since", tomorrow, cwd=tmp_path)
    bad = cli("usage", "--since", "last tuesday", cwd=tmp_path)

    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout.startswith("No usage recorded for ") and tomorrow in nothing.stdout
    assert bad.returncode == 2
    assert "YYYY-MM-DD" in bad.stderr and "Traceback" not in bad.stderr
