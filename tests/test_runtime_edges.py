"""Orchestrator breaks found by the trials (issue 27): unreported usage, file modes, contained
tool exits, redaction of the embedded server's passwords, embeddings drained at exit."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from langchain_core.tools import StructuredTool, tool
from sqlalchemy import text

from orchestrator.dispatch import json_check
from orchestrator.private import open_private_log, private_data_dir
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import embed_later as embed_later_module
from orchestrator.store import embeddings as embeddings_module
from orchestrator.store import storage as storage_module
from orchestrator.store.embedded import PGDATA, embedded_logins
from orchestrator.store.embeddings import EMBEDDABLE, Embedder
from orchestrator.store.engine import Database
from orchestrator.store.logins import APP_ROLE, SECRETS_DIR, SUPERUSER, Logins
from orchestrator.store.storage import Storage
from orchestrator.testing import KeywordEmbeddings, OpenAICompatibleServer, call_tools
from orchestrator.testing.openai_server import RawReply, RawToolCall
from orchestrator.usage.prices import ModelPrice
from tests.helpers import make_session

# --- 6. a streamed reply without usage is unknown, and budgets still hold -----------------


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"Notes on {topic}: " + "lorem ipsum " * 20


def no_usage_call(index: int) -> RawReply:
    return RawReply(tool_calls=[RawToolCall.of("lookup", {"topic": f"t{index}"})], usage=None)


async def test_a_stream_without_usage_is_unknown_and_the_turn_budget_still_stops_it(
    tmp_path: Path,
):
    replies = [no_usage_call(i) for i in range(41)]
    with OpenAICompatibleServer(replies) as server:
        settings = load_settings(
            openai_base_url=server.base_url,
            openai_api_key="test",
            model="openai:priced-llm",
            model_max_retries=0,
            max_tool_iterations=100,
            model_prices={"priced-llm": ModelPrice(input=2.0, output=2.0)},
            max_turn_cost_usd=0.02,
            sub_graphs_dir=tmp_path / "sub_graphs",
            data_dir=tmp_path / "data",
        )
        session = Orchestrator.create(settings, tools=[lookup]).session(user_id="u")
        result = await session.run("look everything up")

    assert all(r.get("stream_options") == {"include_usage": True} for r in server.requests)
    assert result.budget_stop is not None and result.budget_stop.scope == "turn"
    assert len(server.requests) < 41, "the budget stopped the calls"
    assert result.budget_stop.estimated_usd > 0
    assert "estimated" in result.answer and "did not report" in result.answer
    counted = result.usage.models["priced-llm"]
    assert counted.calls == len(server.requests) == counted.unreported_calls
    assert result.cost_usd is None, "an unreported usage is unknown, never $0"
    body = result.to_json()
    assert body["cost_usd"] is None
    assert body["usage"]["usage_unreported"] == ["priced-llm"]
    assert body["usage"]["models"]["priced-llm"]["cost_usd"] is None


# --- 7. what the product writes is private --------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that lets others read what is made without a mode of its own."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.process  # the MCP fixture server
async def test_the_data_directory_logs_and_approvals_are_private(tmp_path: Path, open_umask):
    from tests.mcp.test_folders import Person, fixture_folder, started

    data = tmp_path / "data"
    earlier_log = data / "logs" / "mcp" / "fx.log"
    earlier_log.parent.mkdir(parents=True)
    earlier_log.write_text("an earlier run's line\n")
    earlier_log.chmod(0o644)
    control = tmp_path / "fx"
    fixture_folder(tmp_path / "sub_graphs", "fx", control)
    (control / "fail").touch()  # the server prints a line to standard error and exits

    async with started(Person()):
        pass

    assert "told to fail" in earlier_log.read_text()
    assert mode(earlier_log) == 0o600, "a log made earlier with other modes is made private"
    assert mode(data / "logs") == mode(data / "logs" / "mcp") == 0o700
    assert mode(data / "tool_registry") == 0o700
    kept = list((data / "tool_registry").rglob("*"))
    assert any(f.is_file() for f in kept)
    assert {mode(f) for f in kept if f.is_file()} == {0o600}
    assert {mode(d) for d in kept if d.is_dir()} <= {0o700}


def test_the_data_directory_is_private_and_passable_only_as_root(tmp_path: Path, open_umask):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    private_data_dir(data)
    assert mode(data) == (0o711 if os.geteuid() == 0 else 0o700)


def test_a_new_log_is_private_and_so_is_its_folder(tmp_path: Path, open_umask):
    log = tmp_path / "logs" / "mcp" / "new.log"
    with open_private_log(log, levels=2) as file:
        file.write("key=abc\n")
    assert (mode(log), mode(log.parent), mode(log.parent.parent)) == (0o600, 0o700, 0o700)


# --- 8. GeneratorExit from a tool fails its call only ------------------------------------


@tool
async def closer() -> str:
    """Raise GeneratorExit, as a tool's broken generator code might."""
    raise GeneratorExit


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
async def test_a_tool_raising_generator_exit_fails_only_its_call(scripted, blocking):
    from tests.dispatch.test_execution import raiser

    name = "raiser_go"
    model = scripted(call_tools((name, {})), "It failed.")
    tools = langchain_tools(raiser(GeneratorExit(), blocking=blocking))
    result = await make_session(model, tools).run("go")

    assert result.answer == "It failed."
    assert [c.status for c in result.tool_calls] == ["failure"]
    assert json.loads(model.received[1][-1].text)["message"] == f"{name} failed: GeneratorExit"


async def test_a_langchain_tool_raising_generator_exit_fails_only_its_call(scripted):
    model = scripted(call_tools(("closer", {})), "It failed.")
    result = await make_session(model, [closer]).run("go")

    assert result.answer == "It failed."
    assert [c.status for c in result.tool_calls] == ["failure"]
    assert json.loads(model.received[1][-1].text)["message"] == "closer failed: GeneratorExit"


# --- 8. a schema's pattern is checked off the event loop, within the call's timeout --------

# Backtracks for ever on "aaaa…b" in Python's `re` and in `regex` alike.
CATASTROPHIC = r"^(a|a)*$"


def patterned_tool(ran: list[str], *, timeout: float) -> StructuredTool:
    async def code(code: str) -> str:
        ran.append(code)
        return "accepted"

    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": CATASTROPHIC}},
        "required": ["code"],
    }
    return StructuredTool.from_function(
        coroutine=code,
        name="coded",
        description="Take a code.",
        args_schema=schema,
        metadata={"timeout_seconds": timeout},
    )


async def test_a_pattern_that_never_ends_fails_the_call_at_its_timeout_off_the_loop(
    scripted, monkeypatch: pytest.MonkeyPatch
):
    threads: list[bool] = []
    search = json_check.regex.search

    def watched(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread() is threading.main_thread())
        return search(*args, **kwargs)

    monkeypatch.setattr(json_check.regex, "search", watched)
    ran: list[str] = []
    model = scripted(
        call_tools(("coded", {"code": "a" * 40 + "b"}), ("coded", {"code": "aaa"})), "Done."
    )
    result = await make_session(model, [patterned_tool(ran, timeout=0.5)]).run("go")

    assert [c.status for c in result.tool_calls] == ["failure", "success"]
    messages = [json.loads(m.text)["message"] for m in model.received[1][-2:]]
    assert "could not be checked within 0.5s" in messages[0]
    assert ran == ["aaa"], "only the call whose arguments were checked ran"
    assert threads and not any(threads), "patterns are matched off the event loop's thread"


async def test_a_schema_without_patterns_is_checked_on_the_loop_and_one_with_a_pattern_off_it(
    monkeypatch: pytest.MonkeyPatch,
):
    handed: list[str] = []
    in_thread = json_check.in_thread

    async def watched(function: object, *, name: str) -> object:
        handed.append(name)
        return await in_thread(function, name=name)  # type: ignore[arg-type]

    monkeypatch.setattr(json_check, "in_thread", watched)
    plain = StructuredTool.from_function(
        coroutine=lambda **_: None,
        name="plain",
        description="Take a count.",
        args_schema={"type": "object", "properties": {"count": {"type": "integer"}}},
    )
    patterned = patterned_tool([], timeout=5)

    wrong = await json_check.json_problems_within(plain, {"count": "x"}, seconds=5)
    right = await json_check.json_problems_within(plain, {"count": 3}, seconds=5)
    assert (await json_check.json_problems_within(patterned, {"code": "b"}, seconds=5)) is not None

    assert wrong == "count: 'x' is not of type 'integer'" and right is None
    assert handed == ["coded arguments"], "only the schema with a pattern went to a thread"


# --- 8 and 16: an edit nested too deep is asked again; an unknown key is named -------------


@tool
async def files_delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def test_an_edit_with_an_unknown_key_is_asked_again_naming_it(scripted):
    from tests.dispatch.test_hitl import answer, answer_only, edit_to, questions, session_over

    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Deleted.")
    session = session_over(model, [files_delete])
    await session.run("delete a.txt")

    await answer_only(session, edit_to("files_delete", {"pth": "b.txt"}))
    [again] = await questions(session)
    problem = again.value["problem"]
    assert "'pth'" in problem and "files_delete does not take" in problem and "path" in problem
    await answer(session, {again.id: edit_to("files_delete", {"path": "b.txt"})})
    assert (await session.history())[-1].text == "Deleted."


def test_ask_asks_again_for_an_edit_nested_too_deep(cli, tmp_path: Path):
    from tests.cli.test_answering_questions import asking_folder, lines_of
    from tests.helpers import server_env

    _, tidied = asking_folder(tmp_path)
    deep = "[" * 100_000 + "]" * 100_000
    stdin = f'y\ne\n{{"path": {deep}}}\n{{"path": "z"}}\n'
    with OpenAICompatibleServer([[("files_tidy", {"path": "a"})], "Done."]) as server:
        done = cli("ask", "--answers-from-stdin", "tidy a", cwd=tmp_path, stdin=stdin, env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert "Nested more than 64 deep" in done.stderr
    assert "RecursionError" not in done.stderr + done.stdout
    assert done.stdout.splitlines() == ["Done."]
    assert lines_of(tidied) == ["z"]


# --- 9. the embedded server's own passwords are redacted ----------------------------------


async def test_the_embedded_servers_passwords_never_reach_the_model(
    scripted, embedded_dir: Path, postgres_url: str
):
    secrets = embedded_dir / PGDATA / SECRETS_DIR
    leaked = {role: (secrets / role).read_text().strip() for role in (SUPERUSER, APP_ROLE)}

    @tool
    async def connect() -> str:
        """Connect to the database."""
        raise RuntimeError(
            f"connection failed: password={leaked[SUPERUSER]} (app: {leaked[APP_ROLE]})"
        )

    embedded_logins(embedded_dir)  # as every command that uses the database starts
    model = scripted(call_tools(("connect", {})), "It failed.")
    result = await make_session(model, [connect]).run("connect")

    message = json.loads(model.received[1][-1].text)["message"]
    assert [c.status for c in result.tool_calls] == ["failure"]
    expected = "connection failed: password=[redacted] (app: [redacted])"
    assert message == f"connect failed: RuntimeError: {expected}"


# --- 11. what a short run stored is embedded after it, and `db status` counts what waits ------


async def waiting_rows(database: Database) -> int:
    async with database.admin_transaction() as connection:
        return int(
            await connection.scalar(
                text(f"SELECT count(*) FROM messages WHERE embedding IS NULL AND {EMBEDDABLE}")
            )
        )


async def test_closing_while_the_model_loads_says_how_many_messages_wait(
    tmp_path: Path, database_url: str, database: Database
):
    from tests.store.test_storage import StillLoading, storage_settings, store_one_turn, unique

    gate = threading.Event()
    loading = Embedder(StillLoading(gate), "loading")
    storage = await Storage.open(storage_settings(database_url, tmp_path), embedder=loading)
    try:
        await store_one_turn(storage, user=unique("wes"), session=unique("s"))
        waiting = await storage.close(flush_timeout=3600)
    finally:
        gate.set()  # let the model's thread end

    assert waiting >= 2 and waiting == await waiting_rows(database)


def test_ask_ending_before_the_model_loads_has_the_rest_embedded_in_the_background(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from tests.helpers import server_env
    from tests.store.test_storage import KEYWORDS, StillLoading

    gate = threading.Event()
    monkeypatch.setattr(
        storage_module, "build_embedder", lambda settings: Embedder(StillLoading(gate), "loading")
    )
    started: list[list[str]] = []
    monkeypatch.setattr(
        embed_later_module, "start_detached", lambda command, log: started.append(command)
    )
    try:
        with OpenAICompatibleServer(["Hello."]) as server:
            done = cli("ask", "hi there", cwd=tmp_path, env_extra=server_env(server))
    finally:
        gate.set()
    assert done.returncode == 0, done.stderr
    assert "embedding" not in done.stderr, "started: nothing for the person to do or read"
    assert started == [[sys.executable, "-m", "orchestrator", "db", "embed", "--quiet"]]

    before = cli("db", "status", cwd=tmp_path)
    monkeypatch.setattr(embeddings_module, "build_embedder", lambda settings: KEYWORDS)
    embedded = cli("db", "embed", "--quiet", cwd=tmp_path)
    after = cli("db", "status", cwd=tmp_path)

    waiting = re.search(r"waiting for their vectors: (\d+)", before.stdout)
    assert waiting and int(waiting.group(1)) >= 2, before.stdout
    assert f"embedded {waiting.group(1)} waiting messages with keywords" in embedded.stdout
    assert "waiting for their vectors: 0\n" in after.stdout


def test_ask_waits_for_no_embedding_even_with_its_model_ready(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """What `ask` stored is embedded after it by a process of its own, never in its exit's time."""
    from tests.helpers import server_env
    from tests.store.test_storage import KEYWORDS

    embedded_here: list[str] = []

    class Recording(KeywordEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            embedded_here.extend(texts)
            return super().embed_documents(texts)

    ready = Embedder(Recording(), "keywords", symmetric=True)
    monkeypatch.setattr(storage_module, "build_embedder", lambda settings: ready)
    started: list[list[str]] = []
    monkeypatch.setattr(
        embed_later_module, "start_detached", lambda command, log: started.append(command)
    )
    with OpenAICompatibleServer(["Hello."]) as server:
        done = cli("ask", "hi there", cwd=tmp_path, env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello.\n"
    assert "db embed" not in done.stderr, "nothing for the person to read or wait for"
    assert embedded_here == [], "the ask embedded nothing itself"
    assert started == [[sys.executable, "-m", "orchestrator", "db", "embed", "--quiet"]]

    monkeypatch.setattr(embeddings_module, "build_embedder", lambda settings: KEYWORDS)
    embedded = cli("db", "embed", "--quiet", cwd=tmp_path)
    assert re.search(r"embedded [1-9]\d* waiting messages with keywords", embedded.stdout)
    assert "waiting for their vectors: 0\n" in cli("db", "status", cwd=tmp_path).stdout


@pytest.mark.parametrize(
    ("waiting", "line"),
    [
        (1, "1 stored message waits for its embedding: `orchestrator db embed` embeds it"),
        (2, "2 stored messages wait for their embeddings: `orchestrator db embed` embeds them"),
    ],
)
def test_messages_left_unembedded_are_said_once_when_the_person_must_act(
    waiting: int, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    from orchestrator.cli import startup

    def cannot_start(command: list[str], *, log: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(embed_later_module, "start_detached", cannot_start)
    startup._embed_later(load_settings(data_dir=tmp_path / "data"), waiting)

    said = capsys.readouterr().err.splitlines()
    assert said == [f"{line} (it could not be started: No space left on device)"]


async def test_a_call_ended_by_generator_exit_is_closed_in_the_request_log(
    scripted, database_url: str, database: Database, tmp_path: Path
):
    from orchestrator.store.requests import request_history
    from tests.helpers import storage_for

    model = scripted(call_tools(("closer", {})), "It failed.")
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(load_settings(), model=model, tools=[closer], storage=storage)
        result = await runtime.session(user_id="u1").run("go")

    [call] = result.tool_calls
    statuses = [s for s, _ in await request_history(database, call.request_id, user_id="u1")]
    assert statuses[-2:] == ["failed", "closed"], "not left running"


def test_ask_in_a_process_of_its_own_leaves_what_it_stored_embedded(
    cli, database_logins: Logins, tmp_path: Path
):
    from tests.helpers import cli_env, server_env

    with OpenAICompatibleServer(["Hello."]) as server:
        env = {
            **cli_env(tmp_path),
            **server_env(server),
            "DATABASE_URL": database_logins.owner_url,
            "DATABASE_APP_URL": database_logins.app_url,
            "ORCHESTRATOR_EMBEDDINGS": "local",  # the real local model, loaded by the next process
            "PYTHONPATH": str(Path(__file__).parent.parent),  # this checkout's code
        }
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "ask", "remember the blue kettle"],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
            start_new_session=True, stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, done.stderr
    assert "embedding" not in done.stderr, "started: nothing for the person to do or read"
    embedding = [
        process
        for process in psutil.process_iter(["cmdline", "cwd"])
        if process.info["cmdline"] and process.info["cmdline"][-3:] == ["db", "embed", "--quiet"]
        and process.info["cwd"] == str(tmp_path)
    ]
    _, alive = psutil.wait_procs(embedding, timeout=300)  # it ends once it has embedded them
    assert alive == []

    log_file = tmp_path / "data" / "logs" / "embedding.log"
    assert mode(log_file) == 0o600 and mode(log_file.parent) == 0o700
    log = log_file.read_text()
    assert re.search(r"embedded [1-9]\d* waiting messages with all-MiniLM-L6-v2", log), log
    assert "waiting for their vectors: 0\n" in cli("db", "status", cwd=tmp_path).stdout


def test_patterns_are_checked_as_json_schema_says_and_a_bad_one_is_named():
    async def code(**arguments: object) -> str:
        return "ok"

    def schema_tool(schema: dict[str, object]) -> StructuredTool:
        return StructuredTool.from_function(
            coroutine=code, name="coded", description="Take a code.", args_schema=schema
        )

    keyed = schema_tool(
        {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}},
            "patternProperties": {"^x_": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert json_check.json_problems(keyed, {"code": "abc", "x_a": 1}) is None
    problems = json_check.json_problems(keyed, {"code": "ABC", "x_a": "s", "other": 1})
    assert "'ABC' does not match '^[a-z]+$'" in problems
    assert "x_a: 's' is not of type 'integer'" in problems
    assert "'other' match none of the patterns" in problems
    broken = schema_tool({"type": "object", "properties": {"code": {"pattern": "a("}}})
    assert json_check.json_problems(broken, {"code": "a"}) == (
        "the tool's schema has a pattern that is no regular expression: 'a('"
    )
