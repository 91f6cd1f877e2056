"""Hardening: nothing a tool does escapes its call, and the request log takes any text.

- a tool's error reaches the model, the log and the terminal without secrets or the user's paths;
- a tool raising SystemExit leaves the `ask` process running;
- `ask --json` prints one object whatever a tool prints;
- a non-daemon thread a tool leaves running does not hold the exit;
- a NUL in a call's name or arguments cannot fail the request log.

(Runs counted across a kill are in test_recovery, what tools raise and block in
test_execution, the calculator's bounds in test_builtin_tools.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import ToolCall
from pydantic import BaseModel

from orchestrator.errors import ToolError
from orchestrator.settings import load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import Database
from orchestrator.store.requests import RequestLog, request_history, request_tree
from orchestrator.testing import OpenAICompatibleServer, call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.request_log import CallRecord
from tests.helpers import (
    PLACE,
    cli_env,
    dispatcher,
    logged_context,
    make_session,
    run_call,
    server_env,
)
from tests.tool_folders import LINGERING_TOOL, NOISY_TOOL, QUITTER_TOOL, write_folder


class Nothing(BaseModel):
    pass


def tool_reply(request: dict[str, object]) -> dict[str, object]:
    """The (last) tool message a model request carried, parsed."""
    message = [m for m in request["messages"] if m["role"] == "tool"][-1]  # type: ignore[index]
    return json.loads(message["content"])


# --- errors without secrets or paths ---

HOME = "/home/secret-user"
TOKEN = "tok-7f3a9c1e5b"
API_KEY = "sk-live-51HxQe2eZvKk"
DB_PASSWORD = "hunter2-db"


class Leaky(Tool):
    name: str = "leaky"
    description: str = "Fails with what it knows."

    @action(Nothing)
    async def missing_file(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Open a file in the user's home."""
        raise FileNotFoundError(2, "No such file or directory", f"{HOME}/.config/app/settings.ini")

    @action(Nothing)
    async def secrets(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Fail with credentials in the message."""
        raise ToolError(
            f"GET https://api.example.com/?token={TOKEN} with key {API_KEY} failed; "
            f"db postgresql://app:{DB_PASSWORD}@db.internal/main; log in /var/log/leaky/err.log; "
            f"see {Path(__file__).parent / 'fixtures.txt'}",
            recoverable=False,
        )


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", HOME)
    monkeypatch.setenv("SERVICE_TOKEN", TOKEN)
    monkeypatch.setenv("PAYMENT_API_KEY", API_KEY)


@pytest.mark.usefixtures("secrets")
@pytest.mark.parametrize("action_name", ["missing_file", "secrets"])
async def test_errors_reach_the_model_and_the_log_without_secrets_or_paths(
    scripted, database: Database, action_name: str
):
    name = f"leaky_{action_name}"
    model = scripted(call_tools((name, {})), "It failed.")
    executor = dispatcher(langchain_tools(Leaky()))
    session = f"s-{uuid.uuid4().hex[:8]}"
    call = ToolCall(name=name, args={}, id="c1", type="tool_call")
    message = await run_call(executor, call, logged_context(database, session), config=PLACE)
    await make_session(model, langchain_tools(Leaky())).run("go")

    [logged] = await request_tree(database, message.artifact["request_id"], user_id="u1")
    for shown in (message.text, model.received[1][-1].text, logged.message):
        for secret in (HOME, "secret-user", TOKEN, API_KEY, DB_PASSWORD, "/var/log"):
            assert secret not in shown
    if action_name == "missing_file":
        assert "No such file or directory: '<path>'" in message.text
    else:
        assert "fixtures.txt" in message.text, "a path in the tool's own folder is kept"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("open /etc/passwd failed", "open <path> failed"),
        (f"{HOME}/notes.txt", "<path>"),
        ("GET https://x.org/a/b", "GET https://x.org/a/b"),
        ("7 / 2 and 3/4 and a/b/c", "7 / 2 and 3/4 and a/b/c"),
        ("mysql://root:pa55word@host/db", "mysql://root:[redacted]@host/db"),
        (f"token {TOKEN}!", "token [redacted]!"),
    ],
)
def test_redact(secrets, raw: str, shown: str):
    from orchestrator.redact import redact

    assert redact(raw) == shown


def test_the_settings_secrets_are_redacted_too(tmp_path: Path):
    from orchestrator.redact import redact, remember_settings

    secret_key, password = "sk-from-dot-env-93ab", "pw-in-a-url-77"
    # In `.env`: read into the settings, never into the environment.
    (tmp_path / ".env").write_text(
        f"OPENAI_API_KEY={secret_key}\nDATABASE_APP_URL=postgresql://app:{password}@db/x\n"
    )
    remember_settings(load_settings())

    assert redact(f"key={secret_key}; login {password}") == "key=[redacted]; login [redacted]"


# --- what a tool does in a real process ---


def test_a_tool_raising_system_exit_leaves_the_ask_process_running(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "quitter", code=QUITTER_TOOL)
    with OpenAICompatibleServer([[("quitter_run", {})], "It tried to quit."]) as server:
        done = cli("ask", "--answers-from-stdin", "quit", cwd=tmp_path, stdin="y\n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["It tried to quit."]
    assert tool_reply(server.requests[1])["message"] == "quitter_run failed: SystemExit: 7"


def test_ask_json_prints_one_object_whatever_a_tool_prints(tmp_path: Path, database_url: str):
    write_folder(tmp_path / "sub_graphs", "noisy", code=NOISY_TOOL)
    with OpenAICompatibleServer([[("noisy_run", {})], "Printed."]) as server:
        done = run_process(
            "ask", "--answers-from-stdin", "--json", "print",
            home=tmp_path, stdin="y\n", server=server, database_url=database_url,
        )

    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)  # one object, nothing else
    assert body["answer"] == "Printed."
    for noise in ("noise from print", "noise from file descriptor 1", "noise from a child process"):
        assert noise in done.stderr
    assert "not waiting for" not in done.stderr, "an ordinary exit leaves no thread behind"


def test_a_thread_a_tool_leaves_running_does_not_hold_the_exit(tmp_path: Path, database_url: str):
    gate, done_marker = tmp_path / "gate", tmp_path / "thread-done"
    write_folder(
        tmp_path / "sub_graphs", "lingering",
        code=LINGERING_TOOL.format(gate=str(gate), done=str(done_marker)),
    )
    with OpenAICompatibleServer([[("lingering_run", {})], "Started."]) as server:
        done = run_process(
            "ask", "--answers-from-stdin", "go", home=tmp_path, stdin="y\n", server=server, database_url=database_url
        )
    exited_first = not done_marker.exists()
    gate.write_text("open")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Started."]
    assert exited_first, "the process waited for the tool's thread"
    assert "note: not waiting for 1 thread(s) still running (lingering); exiting" in done.stderr


def run_process(
    *args: str, home: Path, stdin: str, server: OpenAICompatibleServer, database_url: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **cli_env(home), **server_env(server),
        "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none",
    }
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], input=stdin, capture_output=True, text=True,
        cwd=home, env=env, timeout=120, start_new_session=True,
    )


# --- the request log takes any text ---


async def test_a_nul_in_a_call_cannot_fail_the_request_log(database: Database):
    log = RequestLog(database)
    call = CallRecord(
        request_id=uuid.uuid4().hex, parent_request_id=None, session_id="s\x00nul", user_id="u1",
        tool="to\x00ol", action="ac\x00t", call_name="to\x00ol_act",
        parameters={"ke\x00y": ["va\x00lue", {"x": "\x00"}]},
    )
    await log.started(call)
    failed = ToolResult(status="failure", message="bad \x00 byte", data={"a\x00": 1})
    await log.finished(call, failed)

    history = [s for s, _ in await request_history(database, call.request_id, user_id="u1")]
    assert history == ["created", "running", "failed", "closed"]
    [node] = await request_tree(database, call.request_id, user_id="u1")
    assert node.parameters == {"key": ["value", {"x": ""}]} and node.message == "bad  byte"
