"""The `orchestrator` command end to end, in this process (typer's CliRunner) fed scripted stdin."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from http import HTTPStatus
from pathlib import Path

import psutil
import pytest
from langchain_core.messages import HumanMessage

from orchestrator.store import Database, MessageStore
from orchestrator.store.embedded import leave_embedded_server
from orchestrator.store.embeddings import Embedder, EmbeddingWorker
from orchestrator.store.migrations import MIGRATIONS
from orchestrator.store.queue_schema import queue_migrations
from orchestrator.store.sessions import claim_session
from orchestrator.testing import ErrorReply, KeywordEmbeddings, OpenAICompatibleServer
from tests.helpers import cli_env, run_cli, run_cli_process, server_env
from tests.tool_folders import write_folder


def test_piped_chat_remembers_the_first_turn(cli, tmp_path: Path):
    with OpenAICompatibleServer(["Hello Ada.", "Your name is Ada."]) as server:
        done = cli(
            "chat", cwd=tmp_path, stdin="My name is Ada.\nWhat is my name?\n", env_extra=server_env(server)
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Hello Ada.", "Your name is Ada."]
    second = [(m["role"], m["content"]) for m in server.requests[1]["messages"]]
    assert ("user", "My name is Ada.") in second
    assert ("assistant", "Hello Ada.") in second
    assert second[-1] == ("user", "What is my name?")


def test_chat_slash_commands_and_exit(cli, tmp_path: Path):
    stdin = "/help\n/tools\nwhat is 2*21\n/history\n/bogus\n/exit\nnever read\n"
    done = cli("chat", cwd=tmp_path, stdin=stdin)

    assert done.returncode == 0, done.stderr
    assert "/history" in done.stdout  # the help text
    assert "calculator" in done.stdout and "current_time" in done.stdout
    assert "create_execution_plan  Lay out work that takes several tool calls" in done.stdout
    assert "value: 42" in done.stdout
    assert 'you: what is 2*21' in done.stdout
    assert 'assistant calls calculator({"expression": "2*21"})' in done.stdout
    assert "Unknown command /bogus" in done.stderr
    assert "built-in offline model" in done.stderr
    assert "never read" not in done.stdout
    [session] = [line.split()[1] for line in done.stderr.splitlines() if "/help for commands" in line]
    assert f"session {session} kept · orchestrator chat --session {session}" in done.stderr, "how to come back"


def test_chat_keeps_going_after_a_failed_turn(cli, tmp_path: Path):
    script = [ErrorReply(HTTPStatus.SERVICE_UNAVAILABLE, "overloaded"), "second answer"]
    with OpenAICompatibleServer(script) as server:
        stdin = "first question\nsecond question\n/history\n"
        done = cli("chat", cwd=tmp_path, stdin=stdin, env_extra=server_env(server))

    assert done.returncode == 1, "a failed turn makes the exit status non-zero"
    assert "error: The model server at" in done.stderr and "answered 503: overloaded" in done.stderr
    assert "Traceback" not in done.stderr
    assert "second answer" in done.stdout
    assert "you: first question" in done.stdout, "the failed turn's message is kept"
    assert ("user", "first question") in [
        (m["role"], m["content"]) for m in server.requests[1]["messages"]
    ]


@pytest.mark.db
@pytest.mark.process
def test_the_embedded_database_needs_no_setup(tmp_path: Path):
    env = {"ORCHESTRATOR_EMBEDDINGS": "none"}
    first = run_cli("ask", "--json", "--session", "s1", "calculate 6*7", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "data" / "pgdata" / "PG_VERSION").exists()

    status = run_cli("db", "status", cwd=tmp_path, env=env)
    assert status.returncode == 0, status.stderr
    assert f"schema version: {MIGRATIONS[-1].version} (pending: 0)" in status.stdout
    assert f"job queue schema version: {queue_migrations()[-1].version} (pending: 0)" in status.stdout
    # the question and the answer; the call and the tool's output are never embedded
    assert "messages to embed (yours and the assistant's): 2 (0 embedded)" in status.stdout


WIPER = """
import shutil
from pathlib import Path

from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Nothing(BaseModel):
    pass


class Wiper(Tool):
    @action(Nothing)
    async def wipe(self, params: Nothing, request: ToolRequest) -> ToolResult:
        \"\"\"Wipe the data directory, as a person deleting it mid-chat would.\"\"\"
        shutil.rmtree(Path.cwd() / "data")
        return request.result("wiped")
"""


@pytest.mark.db
@pytest.mark.process
def test_a_data_directory_deleted_mid_chat_is_said_once_and_no_session_is_kept(tmp_path: Path):
    from tests.tool_folders import write_folder

    write_folder(tmp_path / "sub_graphs", "wiper", code=WIPER)
    env = {"ORCHESTRATOR_EMBEDDINGS": "none"}
    stdin = "y\nwipe\nwhat is 2*3\n/exit\n"
    done = run_cli("chat", cwd=tmp_path, env=env, stdin=stdin)

    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: the data directory data/ was deleted while this ran: nothing more can be kept "
        "(the database was in it); start again to begin anew"
    ], done.stderr
    assert "kept ·" not in done.stderr and "could not restart" not in done.stderr, done.stderr
    assert "calculator" not in done.stderr, "the chat ended: every turn would have failed"
    leave_embedded_server(tmp_path / "data")  # as the command's exit does (run here: the test's)
    pgdata = str(tmp_path / "data" / "pgdata")
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if pgdata in (p.info["cmdline"] or [])]
    assert left == [], "its server is stopped though its list of users went with the directory"


async def test_db_status_says_which_models_made_the_vectors(cli, database: Database, tmp_path: Path):
    user, session = f"mixed-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    await claim_session(database, session, user_id=user)
    for model in ("model-a", "model-b"):  # the model changed between two runs
        embedder = Embedder(KeywordEmbeddings(), model)
        store = MessageStore(database, embedder=embedder, worker=EmbeddingWorker(database, embedder))
        said = HumanMessage(f"words for {model}", id=uuid.uuid4().hex)
        await store.save([said], session_id=session, user_id=user)
        await store.worker.run_once()

    status = cli("db", "status", cwd=tmp_path)

    assert status.returncode == 0, status.stderr
    made = r"embedded: \d+ by model-a, \d+ by model-b; `orchestrator db reembed` makes them all"
    assert re.search(made, status.stdout), status.stdout


def test_ask_json_prints_one_object(cli, tmp_path: Path):
    done = cli("ask", "--json", "calculate 6*7", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["iterations"] == 2
    [call] = body["tool_calls"]
    assert (call["name"], call["arguments"], call["status"]) == (
        "calculator", {"expression": "6*7"}, "success"
    )
    assert "42" in body["answer"]
    assert "offline model" in done.stderr


def test_ask_against_an_openai_compatible_server(cli, tmp_path: Path):
    script = [[("current_time", {"timezone": "UTC"})], "It is now."]
    with OpenAICompatibleServer(script) as server:
        done = cli("ask", "What time is it?", cwd=tmp_path, env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It is now."
    assert "offline" not in done.stderr


def test_bad_setting_is_one_line_and_non_zero(cli, tmp_path: Path):
    done = cli("ask", "hi", cwd=tmp_path, env_extra={"ORCHESTRATOR_MAX_TOOL_ITERATIONS": "lots"})

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: Invalid setting ORCHESTRATOR_MAX_TOOL_ITERATIONS='lots': "
        "Input should be a valid integer, unable to parse string as an integer "
        "(set in the environment)"
    ]


def test_unreachable_model_server_is_one_line_and_non_zero(cli, tmp_path: Path):
    with OpenAICompatibleServer() as server:
        env = server_env(server)
    done = cli("ask", "--json", "hi", cwd=tmp_path, env_extra=env)

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "Cannot reach the model server" in json.loads(done.stdout)["error"]


def test_requests_show_prints_the_tree_of_a_call(cli, tmp_path: Path):
    asked = cli("ask", "--json", "-u", "rita", "calculate 6*7", cwd=tmp_path)
    [call] = json.loads(asked.stdout)["tool_calls"]

    shown = cli("requests", "show", call["request_id"], "-u", "rita", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"calculator completed (closed)  {call['request_id']}")
    by_prefix = cli("requests", "show", call["request_id"][:12], "-u", "rita", cwd=tmp_path)
    assert by_prefix.returncode == 0 and by_prefix.stdout == shown.stdout, "a prefix, as jobs show"
    drawn = cli("requests", "show", call["request_id"][:12], "--waterfall", "-u", "rita", cwd=tmp_path)
    assert drawn.returncode == 0 and "tool calculator" in drawn.stdout, drawn.stderr

    hidden = cli("requests", "show", call["request_id"], "-u", "sam", cwd=tmp_path)
    assert hidden.returncode == 1
    assert hidden.stderr.strip() == f"error: No request {call['request_id']} of user sam."


@pytest.mark.process
def test_help_version_and_tools_list_load_no_langchain(tmp_path: Path):
    probe = (
        "import sys\n"
        "from orchestrator.cli import main\n"
        "sys.argv = ['orchestrator', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', 'langgraph', 'openai'))\n"
        "print('heavy:', heavy)\n"
    )
    for args in (["--help"], ["--version"], ["tools", "list"]):
        done = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=tmp_path,
            env=cli_env(tmp_path), timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "heavy: []", args
    assert run_cli("--version", cwd=tmp_path).stdout == "orchestrator 0.1.0\n"


# What a configured model's client brings (LangChain's provider packages and their SDKs), and
# `langchain` itself, whose agents package loads `init_chat_model` and its providers' registry.
MODEL_CLIENT_PACKAGES = (
    "langchain", "langchain_openai", "openai", "tiktoken", "langchain_anthropic", "anthropic",
    "langchain_ollama", "ollama",
)
LOADED_PACKAGES = (
    "import sys\n"
    "from orchestrator.cli import main\n"
    "sys.argv = ['orchestrator', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit as end:\n    assert not end.code, end.code\n"
    "print('loaded:', sorted({m.split('.')[0] for m in sys.modules}))\n"
)


def loaded_packages(*args: str, home: Path, env: dict[str, str]) -> set[str]:
    """The top-level packages in `sys.modules` once the command `args` has run, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED_PACKAGES, *args], input="", capture_output=True, text=True,
        cwd=home, env={**cli_env(home), **env}, timeout=120, start_new_session=True,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("loaded: "), done.stdout
    return set(json.loads(last.removeprefix("loaded: ").replace("'", '"')))


@pytest.mark.process
def test_run_json_and_offline_ask_load_no_model_client(database_logins, tmp_path: Path):
    """`run --json` of a tool builds no model (an agent's would, at its first call); the offline model needs no provider."""
    database = {
        "DATABASE_URL": database_logins.owner_url, "DATABASE_APP_URL": database_logins.app_url,
        "ORCHESTRATOR_EMBEDDINGS": "none",
    }
    write_folder(tmp_path / "sub_graphs", "echo")
    assert run_cli_process("tools", "approve", "echo", cwd=tmp_path, env=database).returncode == 0

    with OpenAICompatibleServer([]) as server:
        run = loaded_packages(
            "run", "echo", "--json", '{"text": "hi"}', home=tmp_path, env=database | server_env(server)
        )
    ask = loaded_packages("ask", "what time is it", home=tmp_path, env=database)

    assert server.requests == []
    assert run & set(MODEL_CLIENT_PACKAGES) == set(), "run --json built the configured model"
    assert ask & set(MODEL_CLIENT_PACKAGES) == set(), "the offline model loaded a provider's package"
    assert "prompt_toolkit" not in run | ask, "the line editor is chat's"
    assert {"langgraph", "psycopg"} <= run & ask, "the probe sees what the commands load"


@pytest.mark.process
def test_storage_loads_no_numerical_library(tmp_path: Path):
    """numpy, torch and ONNX Runtime wait for the first vector: `ask` without one never pays for them."""
    probe = (
        "import sys\n"
        "import orchestrator.store.storage\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'torch', 'onnxruntime')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=cli_env(tmp_path), timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "option", [["-u", ""], ["-u", "   "], ["-u", "a\x1b[2Jb"], ["-s", ""], ["-s", "x" * 201]],
    ids=["empty-user", "blank-user", "escape-user", "empty-session", "long-session"],
)
def test_an_id_that_cannot_name_a_user_or_session_is_refused(cli, tmp_path: Path, option: list[str]):
    refused = cli("ask", *option, "hello", cwd=tmp_path)
    assert refused.returncode == 2
    assert "printable characters" in refused.stderr and "\x1b" not in refused.stderr


def test_the_chat_history_file_is_private(tmp_path: Path):
    from orchestrator.terminal.lines import TerminalLines

    history = tmp_path / "data" / "chat_history"
    TerminalLines(history=history, commands=["/help"])
    assert history.stat().st_mode & 0o777 == 0o600, "every line typed is in it"
