"""The result cache stage: an idempotent folder's results reused per user, content and arguments (issue 46).

Against the embedded PostgreSQL, under each user's row-level security; the
cache's clock is the test's, so expiry needs no waiting.
"""

from __future__ import annotations

import json
import uuid
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.dispatch.dispatcher import Dispatcher, default_middleware
from orchestrator.dispatch.result_cache import ResultCacheMiddleware
from orchestrator.errors import ToolConfigError, ToolError, ToolLoadError
from orchestrator.folders.tool_config import ToolConfig, parse_tool_config
from orchestrator.levels import Limits
from orchestrator.settings import load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.sources.loaded import CONTENT_KEY
from orchestrator.store import Database
from orchestrator.store.requests import RequestLog, request_history
from orchestrator.store.result_cache import CACHE_HIT
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, RawToolCall
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.results import Billing
from tests.helpers import server_env, storage_for
from tests.tool_folders import write_folder

LIMITS = Limits(max_iterations=5, max_result_chars=4000, timeout_seconds=30)
CACHED = {"idempotent": True, "cache": {"ttl_seconds": 60}}


class Query(BaseModel):
    query: str
    limit: int = 10


class Lookup(Tool):
    """Counts its runs; `fail` makes its next runs fail."""

    name: str = "lookup"
    description: str = "Looks things up."
    runs: int = 0
    fail: bool = False

    @action(Query)
    async def find(self, params: Query, request: ToolRequest) -> ToolResult:
        """Find it."""
        self.runs += 1
        if self.fail:
            raise ToolError("the index is down")
        return request.result(
            f"{params.query}: run {self.runs}", billing=Billing(total_cost_usd=0.25)
        )


class Clock:
    """The cache's time, moved by the test."""

    def __init__(self, *, ago: timedelta = timedelta()) -> None:
        self.now = datetime.now(UTC) - ago

    def __call__(self) -> datetime:
        return self.now


def folder_tools(tool: Lookup, *, content: str = "v1", **config: object) -> list[BaseTool]:
    """`tool`'s LangChain tools as a folder approved with content hash `content` gives them."""
    made = langchain_tools(tool, config=ToolConfig(name=tool.name, description="x", version="1", **config))
    for each in made:
        each.metadata = {**(each.metadata or {}), CONTENT_KEY: content}
    return made


def pipeline(tools: list[BaseTool], clock: Clock, **settings: object) -> Dispatcher:
    """The default pipeline, its cache (if the settings keep it) on `clock`."""
    layers = [
        ResultCacheMiddleware(clock=clock) if isinstance(layer, ResultCacheMiddleware) else layer
        for layer in default_middleware(load_settings(**settings))
    ]
    return Dispatcher(tools, limits=LIMITS, middleware=layers)


async def call(
    dispatcher: Dispatcher, database: Database, user: str, **arguments: object
) -> ToolResult:
    context = RunContext(
        user_id=user,
        session_id=f"s-{uuid.uuid4().hex[:8]}",
        observer=RequestLog(database),
        database=UserDatabase(database, user),
    )
    tool_call = ToolCall(name="lookup_find", args=arguments, id=uuid.uuid4().hex)
    return await dispatcher.dispatch(dispatcher.request(tool_call, context))


def someone() -> str:
    return f"ann-{uuid.uuid4().hex[:8]}"


async def entries(database: Database, user: str) -> list[str]:
    async with database.user_transaction(user) as connection:
        rows = await connection.execute(text("SELECT content FROM result_cache ORDER BY content"))
        return [row.content for row in rows]


async def test_a_hit_runs_nothing_costs_nothing_and_is_a_hit_in_the_request_log(database: Database):
    tool, clock, user = Lookup(), Clock(), someone()
    dispatcher = pipeline(folder_tools(tool, **CACHED), clock)

    first = await call(dispatcher, database, user, query="tea")
    again = await call(dispatcher, database, user, limit=10, query="tea")  # the same, in full, in another order
    other = await call(dispatcher, database, user, query="coffee")

    assert tool.runs == 2, "the second call of tea ran nothing"
    assert (first.message, again.message, other.message) == ("tea: run 1", "tea: run 1", "coffee: run 2")
    assert first.billing is not None and again.billing is None, "a hit costs nothing"
    assert again.request_id is not None and again.request_id != first.request_id
    history = await request_history(database, again.request_id, user_id=user)
    assert [status for status, _ in history] == ["created", "running", CACHE_HIT, "completed", "closed"]
    detail = dict(history)[CACHE_HIT]
    assert detail is not None and first.request_id in detail
    assert CACHE_HIT not in [s for s, _ in await request_history(database, first.request_id, user_id=user)]
    async with database.user_transaction(user) as connection:
        billed = await connection.execute(text("SELECT request_id FROM request_usage WHERE kind = 'tool'"))
        assert {row.request_id for row in billed} == {first.request_id, other.request_id}


async def test_another_user_misses_and_never_reads_the_first_users_entries(database: Database):
    tool, clock, ann, bob = Lookup(), Clock(), someone(), someone()
    dispatcher = pipeline(folder_tools(tool, **CACHED), clock)

    await call(dispatcher, database, ann, query="tea")
    bobs = await call(dispatcher, database, bob, query="tea")

    assert tool.runs == 2 and bobs.message == "tea: run 2"
    assert await entries(database, ann) == ["v1"] and await entries(database, bob) == ["v1"]
    async with database.user_transaction(bob) as connection:  # row-level security, not the query
        seen = await connection.scalar(
            text("SELECT count(*) FROM result_cache WHERE user_id = :ann"), {"ann": ann}
        )
    assert seen == 0


async def test_a_change_of_the_folder_misses_and_purges_the_entries_of_its_old_content(database: Database):
    tool, clock, user = Lookup(), Clock(), someone()
    await call(pipeline(folder_tools(tool, **CACHED), clock), database, user, query="tea")
    assert await entries(database, user) == ["v1"]

    changed = pipeline(folder_tools(tool, content="v2", **CACHED), clock)
    after = await call(changed, database, user, query="other")

    assert await entries(database, user) == ["v2"], "the old content's entry is gone"
    again = await call(changed, database, user, query="tea")
    assert tool.runs == 3 and (after.message, again.message) == ("other: run 2", "tea: run 3")


async def test_an_entry_expires_after_its_ttl_and_an_action_may_have_its_own(database: Database):
    tool, clock, user = Lookup(), Clock(), someone()
    per_action = {"idempotent": True, "cache": {"ttl_seconds": 60, "actions": {"find": {"ttl_seconds": 600}}}}
    folder_wide = pipeline(folder_tools(tool, **CACHED), clock)

    await call(folder_wide, database, user, query="tea")
    clock.now += timedelta(seconds=59)
    await call(folder_wide, database, user, query="tea")
    assert tool.runs == 1, "still fresh"
    clock.now += timedelta(seconds=1)
    await call(folder_wide, database, user, query="tea")
    assert tool.runs == 2, "expired at 60 seconds"

    own = pipeline(folder_tools(tool, **per_action), clock)
    clock.now += timedelta(seconds=300)  # the folder-wide entry has expired; the action's is kept 600
    await call(own, database, user, query="tea")
    clock.now += timedelta(seconds=599)
    await call(own, database, user, query="tea")
    assert tool.runs == 3


async def test_the_setting_and_a_folder_without_cache_run_every_call(database: Database):
    tool, clock, user = Lookup(), Clock(), someone()
    off = pipeline(folder_tools(tool, **CACHED), clock, result_cache=False)
    undeclared = pipeline(folder_tools(tool, idempotent=True), clock)

    for dispatcher in (off, off, undeclared, undeclared):
        await call(dispatcher, database, user, query="tea")

    assert tool.runs == 4
    assert not any(isinstance(layer, ResultCacheMiddleware) for layer in off.middleware)
    assert await entries(database, user) == []


async def test_an_error_is_never_kept(database: Database):
    tool, clock, user = Lookup(fail=True), Clock(), someone()
    dispatcher = pipeline(folder_tools(tool, **CACHED), clock)

    failed = await call(dispatcher, database, user, query="tea")
    tool.fail = False
    worked = await call(dispatcher, database, user, query="tea")

    assert failed.status == "failure" and worked.message == "tea: run 2"
    assert tool.runs == 2 and await entries(database, user) == ["v1"]


class Unreachable:
    """A database that is away."""

    def user_transaction(self, user_id: str) -> AbstractAsyncContextManager[AsyncConnection]:
        raise OSError("connection refused")


async def test_a_database_that_fails_the_cache_costs_no_result(caplog: pytest.LogCaptureFixture):
    tool = Lookup()
    dispatcher = pipeline(folder_tools(tool, **CACHED), Clock())
    context = RunContext(user_id="ann", database=UserDatabase(Unreachable(), "ann"))

    results = [
        await dispatcher.dispatch(dispatcher.request(ToolCall(name="lookup_find", args={"query": "tea"}, id=f"c{n}"), context))
        for n in range(2)
    ]

    assert [r.message for r in results] == ["tea: run 1", "tea: run 2"]
    assert "result cache lookup failed: OSError: connection refused" in caplog.text
    assert "result cache write failed: OSError: connection refused" in caplog.text


async def test_each_start_of_the_storage_sweeps_every_users_expired_entries(
    database: Database, database_url: str, tmp_path: Path
):
    tool, gone, fresh = Lookup(), someone(), someone()
    await call(pipeline(folder_tools(tool, **CACHED), Clock(ago=timedelta(hours=1))), database, gone, query="tea")
    await call(pipeline(folder_tools(tool, **CACHED), Clock()), database, fresh, query="tea")
    assert await entries(database, gone) == ["v1"], "expired, but nobody has missed it yet"

    async with storage_for(database_url, tmp_path):
        pass

    assert await entries(database, gone) == [] and await entries(database, fresh) == ["v1"]


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"cache": {"ttl_seconds": 60}}, "idempotent: true"),
        ({"idempotent": True, "requires_approval": True, "cache": {"ttl_seconds": 60}}, "requires_approval"),
        (
            {"idempotent": True, "sensitive_actions": ["find"], "cache": {"actions": {"find": {"ttl_seconds": 5}}}},
            "find is in `sensitive_actions`",
        ),
        ({"idempotent": True, "sensitive_actions": ["find"], "cache": {"ttl_seconds": 60}}, "no folder-wide"),
        ({"idempotent": True, "cache": {}}, "give `ttl_seconds`"),
        ({"idempotent": True, "cache": {"ttl_seconds": 0}}, "greater than 0"),
        ({"idempotent": True, "cache": {"ttl_seconds": 604_801}}, "less than or equal to 604800"),
    ],
)
def test_a_cache_on_what_may_change_things_is_a_clear_config_error(config: dict[str, object], says: str):
    import yaml

    body = {"name": "lookup", "description": "x", "version": "1", **config}
    with pytest.raises(ToolConfigError) as error:
        parse_tool_config(yaml.safe_dump(body).encode())
    assert says in str(error.value)


class Mailer(Tool):
    name: str = "mailer"
    description: str = "Sends mail."

    @action(Query, sensitive=True)
    async def send(self, params: Query, request: ToolRequest) -> ToolResult:
        """Send it."""
        return request.result("sent")


@pytest.mark.parametrize(
    ("tool", "action", "says"),
    [
        (Lookup(), "fnid", "lookup: tool_config.yaml's cache.actions names 'fnid', not an action of it"),
        (Mailer(), "send", "mailer: tool_config.yaml's cache.actions names 'send', which its author"),
    ],
)
def test_a_cached_action_the_tool_lacks_or_its_author_marks_sensitive_is_a_clear_load_error(
    tool: Tool, action: str, says: str
):
    config = ToolConfig.model_validate(
        {"name": tool.name, "description": "x", "version": "1", "idempotent": True,
         "cache": {"actions": {action: {"ttl_seconds": 5}}}}
    )
    with pytest.raises(ToolLoadError) as error:
        langchain_tools(tool, config=config)
    assert says in str(error.value)


COUNTING_TOOL = '''
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

RUNS = Path({runs!r})


class Find(BaseModel):
    query: str


class Lookup(Tool):
    @action(Find)
    async def find(self, params: Find, request: ToolRequest) -> ToolResult:
        """Find it."""
        with RUNS.open("a") as runs:
            runs.write(params.query + "\\n")
        return request.result(params.query + " found")
'''


def counting_folder(cli, home: Path, runs: Path) -> Path:
    """The approved folder `lookup`, cached an hour, whose `find` adds a line to `runs` each run."""
    config = {"name": "lookup", "description": "x", "version": "1", "idempotent": True, "cache": {"ttl_seconds": 3600}}
    folder = write_folder(home / "sub_graphs", "lookup", config=config, code=COUNTING_TOOL.format(runs=str(runs)))
    assert cli("tools", "approve", "lookup", cwd=home).returncode == 0
    return folder


def ran(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


async def test_run_reuses_a_result_says_so_in_requests_show_and_no_cache_or_the_setting_runs_it(
    cli, tmp_path: Path, database: Database
):
    runs = tmp_path / "runs.txt"
    folder = counting_folder(cli, tmp_path, runs)
    ann, bob = someone(), someone()
    assert ", idempotent, results reused 3600 s" in cli("tools", "show", "lookup", cwd=tmp_path).stdout

    def run(user: str, *options: str, env: dict[str, str] | None = None) -> dict[str, object]:
        done = cli("run", "lookup", "find", "--json", '{"query": "tea"}', "-u", user, *options, cwd=tmp_path, env_extra=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first, hit = run(ann), run(ann)
    assert ran(runs) == 1 and hit["message"] == first["message"] == "tea found"
    hit_id = hit["metadata"]["request_id"]  # pyright: ignore[reportIndexIssue]  # JSON
    shown = cli("requests", "show", hit_id, "-u", ann, cwd=tmp_path)
    assert "cache_hit" in shown.stdout and first["metadata"]["request_id"] in shown.stdout  # pyright: ignore[reportIndexIssue]  # JSON
    run(bob)
    assert ran(runs) == 2, "another user's call runs"
    run(ann, "--no-cache")
    run(ann, env={"ORCHESTRATOR_RESULT_CACHE": "false"})
    assert ran(runs) == 4
    before = await entries(database, ann)

    (folder / "lookup_tool.py").write_text(COUNTING_TOOL.format(runs=str(runs)) + "# changed\n")
    assert cli("tools", "approve", "lookup", cwd=tmp_path).returncode == 0
    run(ann)

    assert ran(runs) == 5, "a changed folder's call runs"
    after = await entries(database, ann)
    assert len(before) == len(after) == 1 and before != after, "the old content's entry is purged"


def test_ask_reuses_a_result_and_no_cache_on_ask_and_chat_runs_the_call(cli, tmp_path: Path):
    runs = tmp_path / "runs.txt"
    counting_folder(cli, tmp_path, runs)
    find = RawReply(tool_calls=[RawToolCall.of("lookup_find", {"query": "tea"})])
    user = someone()

    with OpenAICompatibleServer([find, "Found.", find, "Found.", find, "Found.", find, "Found."]) as server:
        env = server_env(server)
        asked = [
            cli("ask", "find tea", "-u", user, *options, cwd=tmp_path, env_extra=env)
            for options in ((), (), ("--no-cache",))
        ]
        chatted = cli("chat", "-u", user, "--no-cache", cwd=tmp_path, stdin="find tea\n", env_extra=env)

    assert [done.returncode for done in [*asked, chatted]] == [0, 0, 0, 0], chatted.stderr
    assert ran(runs) == 3, "the first ask ran it, the second reused it, --no-cache ran it twice"
