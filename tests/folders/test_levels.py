"""Config inheritance: each folder's level is its parent's, with what its tool_config.yaml sets."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import SystemMessage, ToolMessage
from sqlalchemy import text

from orchestrator.folders.discovery import discover_tree, walk
from orchestrator.folders.importer import package_name
from orchestrator.folders.level_view import describe_level
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.settings import env_value, load_settings
from orchestrator.sources.loaded import LoadedTool
from orchestrator.store import Database, Storage
from orchestrator.store.embedded import embedded_logins
from orchestrator.store.logins import Logins
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools
from tests.helpers import cli_env, run_cli
from tests.tool_folders import AGENT_TOOL, SHIPPED, write_folder

TASK_AGENT = SHIPPED / "personal_assistant_agent/src/sub_graphs/task_agent"
TASKS_CODE = (TASK_AGENT / "task_agent_tool.py").read_text()
BASE = {"version": "1.0"}


def config(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "description": f"The {name} tool.", **BASE, **fields}


def agent(root: Path, directory: str, **fields: object) -> Path:
    name = directory.rsplit("/", 1)[-1]
    return write_folder(root, directory, config=config(name, **fields), code=AGENT_TOOL.format(name=name.title()))


def tool(root: Path, directory: str, **fields: object) -> Path:
    return write_folder(root, directory, config=config(directory.rsplit("/", 1)[-1], **fields))


def tasks(root: Path, directory: str, **fields: object) -> Path:
    """A copy of the shipped task list, its modules and the migration that makes its `tasks` table."""
    name = directory.rsplit("/", 1)[-1]
    fields = {"entry_point": "task_agent_tool.py", **fields}
    folder = write_folder(root, directory, config=config(name, **fields), code=TASKS_CODE, entry="task_agent_tool.py")
    for module in TASK_AGENT.glob("*.py"):
        shutil.copy2(module, folder / module.name)
    shutil.copytree(TASK_AGENT / "migrations", folder / "migrations")
    return folder


def by_name(runtime: Orchestrator) -> dict[str, LoadedTool]:
    return {loaded.folder.name: loaded for loaded in runtime.loaded_folders()}


def approve_all(folder: object, status: object) -> bool:
    return True


def system_prompts(model: ScriptedChatModel) -> list[str]:
    return [m.text for call in model.received for m in call if isinstance(m, SystemMessage)]


# --- tool_config.yaml: the words it takes, and what a bad value costs --------------------


@pytest.mark.parametrize("llm", ["inherit", "parent", {"inherit": "parent"}, {"inherit": "inherit"}, {}])
def test_inherit_and_parent_are_the_same_choice(llm: object):
    parsed = ToolConfig.model_validate(config("x", llm=llm, db=llm))
    assert not parsed.llm.local and not parsed.db.local


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"llm": {"model": "openai:x"}}, "llm: Value error, `model` is used only with `inherit: local`"),
        ({"llm": "local"}, "llm: Value error, `model` is required when inherit is local"),
        ({"db": {"inherit": "local"}}, "db: Value error, inherit: local needs one of `url` and `url_env`"),
        ({"db": {"inherit": "local", "url": "mysql://me:hunter2@h/d"}}, "db.url: Value error, must be a postgresql:// URL"),
        ({"limits": {"max_iterations": 0}}, "limits.max_iterations: Input should be greater than or equal to 1"),
        ({"limits": {"timeout": 5}}, "limits.timeout: Extra inputs are not permitted"),
        ({"log_level": "loud"}, "log_level: Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'"),
        (
            {"llm": {"inherit": "local", "model": "openai:m", "base_url": "localhost:8080/v1"}},
            "llm.base_url: Value error, the URL has no scheme: write it as http://localhost:8080/v1 (or https://...)",
        ),
        ({"llm": {"max_output_tokens": 0}}, "llm.max_output_tokens: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_level_value_skips_the_folder_with_one_line(tmp_path: Path, fields: dict[str, object], reason: str):
    tool(tmp_path, "bad", **fields)

    [problem] = discover_tree(tmp_path).problems

    assert problem.reason.endswith(reason) and "\n" not in problem.reason
    assert "hunter2" not in problem.reason


# --- limits and log level: per key, from the nearest level that sets it ---------------------


def limits_tree(root: Path) -> None:
    agent(root, "top", limits={"max_iterations": 7}, log_level="debug")
    agent(root, "top/src/sub_graphs/mid", limits={"timeout_seconds": 5, "max_result_chars": 300})
    tool(root, "top/src/sub_graphs/mid/src/sub_graphs/leaf")
    tool(root, "top/src/sub_graphs/mid/src/sub_graphs/slow", timeout_seconds=30)
    tool(root, "top/src/sub_graphs/side")


def test_limits_inherit_per_key_down_the_tree(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    limits_tree(root)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data", max_tool_result_chars=3000)

    loaded = by_name(Orchestrator.create(settings, model=ScriptedChatModel(), ask=approve_all))

    assert loaded["top"].level.limits == Limits(7, 3000, 60.0, 20.0)
    assert loaded["mid"].level.limits == Limits(7, 300, 5.0, 20.0)
    assert loaded["leaf"].level.limits == Limits(7, 300, 5.0, 20.0), "a leaf inherits each key"
    timeouts = {t.name: t.metadata["timeout_seconds"] for t in loaded["mid"].tool.tools}
    assert timeouts == {"leaf_say": 5.0, "slow_say": 30.0}, "a folder's own timeout_seconds wins"
    assert loaded["side"].langchain[0].metadata["timeout_seconds"] == 60.0


async def test_a_level_runs_under_its_own_limits(tmp_path: Path, scripted):
    root = tmp_path / "sub_graphs"
    limits_tree(root)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    long_text = "x" * 100
    model = scripted(
        call_tools(("top_ask", {"request": "go"})),
        call_tools(("mid_ask", {"request": "go"})),
        call_tools(("leaf_say", {"text": long_text, "times": 5})),  # over 500 characters of result
        "mid done",
        "top done",
        "all done",
    )

    session = Orchestrator.create(settings, model=model, ask=approve_all).session(user_id="u")

    await session.run("go")

    # the same model serves every level here: its calls are the orchestrator's, top's, mid's twice, ...
    leaf_result = next(m for m in model.received[3] if isinstance(m, ToolMessage))
    cut, note = leaf_result.text[:300], leaf_result.text[300:]
    assert note.startswith("\n[truncated: the result was") and "over the limit of 300;" in note
    assert long_text in cut, "mid's max_result_chars cut its tool's result"
    mid_result = next(m for m in model.received[4] if isinstance(m, ToolMessage))
    assert "mid done" in mid_result.text and "truncated" not in mid_result.text


def test_a_folders_log_level_holds_for_the_folders_below_it(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    limits_tree(root)
    tool(root, "plain")
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")

    loaded = by_name(Orchestrator.create(settings, model=ScriptedChatModel(), ask=approve_all))

    def level_of(name: str) -> int:
        return logging.getLogger(package_name(loaded[name].folder.path)).level

    assert level_of("top") == level_of("leaf") == logging.DEBUG
    assert level_of("plain") == logging.NOTSET, "the rest follows the process's logging"


def test_describe_level_names_who_set_each_value(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    limits_tree(root)
    settings = load_settings(sub_graphs_dir=root)
    chain = [node.folder.config for node in walk(discover_tree(root).nodes)][:3]  # top, mid, leaf

    view = describe_level(settings, chain)

    assert {name: (s.value, s.origin) for name, s in view.limits.items()} == {
        "max_iterations": (7, "top"),
        "max_result_chars": (300, "mid"),
        "timeout_seconds": (5.0, "mid"),
        "inline_budget_seconds": (20.0, "orchestrator"),
    }
    assert (view.log_level.value, view.log_level.origin) == ("DEBUG", "top")
    assert view.model.value is None and view.database.value is None


# --- the model: a child's own, its siblings' the parent's ---------------------------------


async def test_a_child_with_its_own_model_uses_it_while_its_sibling_uses_the_parents(tmp_path: Path, scripted):
    root = tmp_path / "sub_graphs"
    with OpenAICompatibleServer([[("echo_say", {"text": "hi"})], "own done"]) as server:
        llm = {"inherit": "local", "model": "openai:child-model", "base_url": server.base_url}
        agent(root, "own", llm=llm)
        tool(root, "own/src/sub_graphs/echo")
        agent(root, "sib")
        tool(root, "sib/src/sub_graphs/echo")
        settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data", model_max_retries=0)
        model = scripted(
            call_tools(("own_ask", {"request": "say hi"})),
            call_tools(("sib_ask", {"request": "say ho"})),
            call_tools(("echo_say", {"text": "ho"})),  # sib's own model call: the parent's model
            "sib done",
            "both done",
        )
        runtime = Orchestrator.create(settings, model=model, ask=approve_all)
        result = await runtime.session(user_id="u").run("go")

    assert result.answer == "both done"
    assert [r["model"] for r in server.requests] == ["child-model", "child-model"]
    assert server.requests[0]["messages"][0]["content"].startswith("You are own,")
    assert json.loads(server.requests[1]["messages"][-1]["content"])["message"] == "hi"
    prompts = system_prompts(model)
    assert any(p.startswith("You are sib,") for p in prompts)
    assert not any(p.startswith("You are own,") for p in prompts), "own never used the parent's model"
    loaded = by_name(runtime)
    assert loaded["sib"].level.model is model and loaded["own"].level.model is not model


def test_an_own_openai_model_without_an_endpoint_is_served_by_the_orchestrators():
    from orchestrator.llm.providers import build_agent_model

    settings = load_settings(
        model="openai:main", openai_base_url="http://127.0.0.1:9/v1", openai_api_key="sk-main-key"
    )
    override = ToolConfig.model_validate(config("x", llm={"inherit": "local", "model": "openai:other"})).llm

    model = build_agent_model(override, parent=ScriptedChatModel(), settings=settings)

    assert (model.model_name, model.openai_api_base) == ("other", "http://127.0.0.1:9/v1")
    assert model.openai_api_key.get_secret_value() == "sk-main-key"


def test_variables_a_folder_names_come_from_the_environment_then_dotenv(tmp_path: Path, monkeypatch):
    (tmp_path / ".env").write_text("IN_DOTENV=from-dotenv\nIN_BOTH=from-dotenv\n")  # the home's
    monkeypatch.setenv("IN_BOTH", "from-environment")

    assert env_value("IN_DOTENV") == "from-dotenv"
    assert env_value("IN_BOTH") == "from-environment"
    assert env_value("NOWHERE") is None


# --- the database: a child's own, migrated, for it and the folders below it ---------------


@pytest.fixture
def child_database(embedded_dir: Path, postgres_url: str) -> Iterator[Logins]:
    """A new, empty database (no schema yet) on the run's server, dropped afterwards."""
    name = f"child_{uuid.uuid4().hex[:12]}"
    yield embedded_logins(embedded_dir, database=name)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


WHERE_TOOL = '''
from pydantic import BaseModel
from sqlalchemy import text

from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.context import current_context


class Nothing(BaseModel):
    pass


class Where(Tool):
    @action(Nothing)
    async def now(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Name the database the run's context hands this call."""
        async with current_context().database.transaction() as connection:
            return request.result(await connection.scalar(text("SELECT current_database()")))
'''


async def titles(database: Database, user: str) -> list[str]:
    async with database.user_transaction(user) as connection:
        rows = await connection.execute(text("SELECT title FROM tasks ORDER BY task_id"))
        return [row[0] for row in rows]


async def test_a_child_with_its_own_database_writes_to_it(
    tmp_path: Path, scripted, database_url: str, database: Database, child_database: Logins, monkeypatch
):
    monkeypatch.setenv("CHILD_DB_URL", child_database.owner_url)
    monkeypatch.setenv("CHILD_DB_APP_URL", child_database.app_url)
    root = tmp_path / "sub_graphs"
    own = {"inherit": "local", "url_env": "CHILD_DB_URL", "app_url_env": "CHILD_DB_APP_URL"}
    agent(root, "keeper", db=own)
    tasks(root, "keeper/src/sub_graphs/notes")  # inherits keeper's database
    write_folder(root, "keeper/src/sub_graphs/where", config=config("where"), code=WHERE_TOOL)
    tasks(root, "shelf")  # the orchestrator's
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data", database_url=database_url, embeddings="none")
    model = scripted(
        call_tools(("keeper_ask", {"request": "note: buy milk"})),
        call_tools(("notes_add", {"title": "Buy milk"}), ("where_now", {})),
        "noted",
        call_tools(("shelf_add", {"title": "Sell milk"})),
        "done",
    )
    storage = await Storage.open(settings)
    runtime = Orchestrator.create(settings, model=model, ask=approve_all, storage=storage)
    try:
        await runtime.session(user_id="lena").run("go")
    finally:
        await runtime.close()
        await storage.close()

    child = Database(child_database.owner_url, app_url=child_database.app_url)
    try:
        assert await titles(child, "lena") == ["Buy milk"], "the child's table was made by the migrations"
    finally:
        await child.close()
    assert await titles(database, "lena") == ["Sell milk"]
    where = next(m for m in model.received[2] if isinstance(m, ToolMessage) and m.name == "where_now")
    child_name = child_database.owner_url.rsplit("/", 1)[1].split("?")[0]
    assert json.loads(where.text)["message"] == child_name, "the run context below keeper has its database"


def test_a_database_that_cannot_be_used_skips_only_its_folder(tmp_path: Path, caplog, monkeypatch):
    monkeypatch.setenv("NOWHERE_URL", "postgresql://me:hunter2@127.0.0.1:1/nothing")
    root = tmp_path / "sub_graphs"
    tool(root, "unset", db={"inherit": "local", "url_env": "NOT_SET_ANYWHERE"})
    tool(root, "nowhere", db={"inherit": "local", "url_env": "NOWHERE_URL"})
    tool(root, "fine")
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")

    with caplog.at_level(logging.WARNING, logger="orchestrator.sources.level_loading"):
        runtime = Orchestrator.create(settings, model=ScriptedChatModel(), ask=approve_all)

    assert set(by_name(runtime)) == {"fine"}
    reasons = {r.getMessage().split(": ", 1)[1] for r in caplog.records}
    assert "db.url_env names NOT_SET_ANYWHERE, which is not set" in reasons
    [unreachable] = [r for r in reasons if r.startswith("db: cannot prepare the database at 127.0.0.1/nothing")]
    assert "hunter2" not in unreachable and "\n" not in unreachable


# --- tools show ----------------------------------------------------------------------------

SCOPED_TOOL = '''
from typing import Annotated

from pydantic import BaseModel, Field

from orchestrator.tools import NotAI, Tool, ToolRequest, ToolResult, action


class FetchParams(BaseModel):
    url: str = Field(description="The page to fetch.")
    api_key: Annotated[str, NotAI] = Field(description="The service's key.")


class Vault(Tool):
    @action(FetchParams)
    async def fetch(self, params: FetchParams, request: ToolRequest) -> ToolResult:
        """Fetch a page."""
        return request.result(params.url)
'''

SECRETS = ("sk-very-secret-1", "hunter2", "fixed-secret-2", "p4ssw0rd-3", "app-secret-4")


def secret_folders(root: Path) -> None:
    """An agent with its own model and database, over a tool whose key tool_config.yaml fixes."""
    agent(
        root,
        "keeper",
        llm={"inherit": "local", "model": "openai:own", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "VAULT_KEY"},
        db={"inherit": "local", "url": "postgresql://me:hunter2@db.example:5432/vault", "app_url_env": "VAULT_APP"},
        config={"password": "p4ssw0rd-3"},
        limits={"max_iterations": 3},
    )
    write_folder(
        root,
        "keeper/src/sub_graphs/vault",
        config=config("vault", parameters={"api_key": {"value": "fixed-secret-2"}}),
        code=SCOPED_TOOL,
    )


def test_tools_show_names_secrets_and_never_prints_them(tmp_path: Path):
    secret_folders(tmp_path / "sub_graphs")
    env = {"VAULT_KEY": "sk-very-secret-1", "VAULT_APP": "postgresql://app:app-secret-4@db.example/vault"}
    for name in ("keeper", "vault"):
        assert run_cli("tools", "approve", name, cwd=tmp_path).returncode == 0

    runs = [
        run_cli("tools", "show", name, *json_flag, cwd=tmp_path, env=env)
        for name in ("keeper", "vault")
        for json_flag in ([], ["--json"])
    ]

    for done in runs:
        assert done.returncode == 0, done.stderr
        for secret in SECRETS:
            assert secret not in done.stdout + done.stderr
    keeper, keeper_json, vault, vault_json = runs
    assert "api key: from VAULT_KEY (set)" in keeper.stdout
    assert "postgresql://me:***@db.example:5432/vault (local)" in keeper.stdout
    assert "postgresql://me:***@db.example:5432/vault (inherited from keeper)" in vault.stdout
    assert "max_iterations: 3 (local)" in keeper.stdout
    assert "max_iterations: 3 (inherited from keeper)" in vault.stdout
    assert "max_result_chars: 4000 (inherited from the orchestrator)" in vault.stdout
    assert json.loads(keeper_json.stdout)["model"] == {
        "model": "openai:own", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "VAULT_KEY",
        "api_key_set": True, "temperature": None, "streaming": True, "origin": "keeper",
        "inherited": False,
        # Its own model answers the rounds after tool results too.
        "tool_result_model": {"value": None, "origin": "keeper", "inherited": False},
    }
    assert json.loads(keeper_json.stdout)["config_keys"] == ["password"]
    assert json.loads(keeper_json.stdout)["database"]["app_url_env_set"] is True
    report = json.loads(vault_json.stdout)
    assert report["agent"] is False and report["model"] is None
    [fetch] = report["actions"]
    assert [(p["name"], p["set_by"]) for p in fetch["parameters"]] == [
        ("url", "the model"), ("api_key", "tool_config.yaml")
    ]


def test_tools_show_says_what_a_folder_inherits_and_from_whom(tmp_path: Path):
    limits_tree(tmp_path / "sub_graphs")
    assert run_cli("tools", "approve", "top", cwd=tmp_path).returncode == 0

    done = run_cli("tools", "show", "leaf", "--json", cwd=tmp_path)

    report = json.loads(done.stdout)
    assert {name: (e["value"], e["origin"], e["inherited"]) for name, e in report["limits"].items()} == {
        "max_iterations": (7, "top", True),
        "max_result_chars": (300, "mid", True),
        "timeout_seconds": (5.0, "mid", True),
        "inline_budget_seconds": (20.0, "orchestrator", True),
    }
    assert report["calls"]["timeout_seconds"] == 5.0 and report["calls"]["timeout_from"] == "limits.timeout_seconds"
    assert report["status"] == "new" and report["not_loaded_because"] == "mid above it is new"
    assert report["actions"] is None, "a folder not approved is not imported"
    assert report["database"]["embedded"] == str(tmp_path / "data" / "pgdata")


def test_tools_show_times_a_folders_calls_by_the_level_that_makes_them(tmp_path: Path):
    limits_tree(tmp_path / "sub_graphs")  # mid sets timeout_seconds: 5 for the calls below it

    report = json.loads(run_cli("tools", "show", "mid", "--json", cwd=tmp_path).stdout)
    shown = run_cli("tools", "show", "mid", cwd=tmp_path).stdout

    assert report["limits"]["timeout_seconds"]["value"] == 5.0, "its level's: of its tools' calls"
    assert (report["calls"]["timeout_seconds"], report["calls"]["timeout_origin"]) == (
        60.0, "orchestrator"
    ), "a call of mid is made, and timed, by top's level"
    assert "  calls of it: timeout 60 s (the orchestrator's limits.timeout_seconds" in shown


@pytest.mark.process
def test_tools_show_loads_no_langchain(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    agent(root, "top")
    tool(root, "top/src/sub_graphs/leaf")
    env = {**cli_env(tmp_path), "XDG_DATA_HOME": str(tmp_path / "user-data")}
    for name in ("top", "leaf"):
        assert run_cli("tools", "approve", name, cwd=tmp_path).returncode == 0
    probe = (
        "import sys\n"
        "from orchestrator.cli import main\n"
        "sys.argv = ['orchestrator', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', 'langgraph', 'openai'))\n"
        "print('heavy:', heavy)\n"
    )
    for name in ("top", "leaf"):
        done = subprocess.run(
            [sys.executable, "-c", probe, "tools", "show", name], capture_output=True, text=True,
            cwd=tmp_path, env=env, timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert f"{name}_" in done.stdout, "its actions were listed: its code was imported"
        assert done.stdout.splitlines()[-1] == "heavy: []", name
