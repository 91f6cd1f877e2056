"""`orchestrator run`: one approved action from the command line, by JSON or in words (issue 32)."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text

from orchestrator.paths import user_data_dir
from orchestrator.sources.manifest import MANIFEST_DIR, wait_for_manifests
from orchestrator.store import Database
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, RawToolCall, Usage
from tests.helpers import server_env
from tests.tool_folders import ECHO_TOOL, copy_shipped, parrot_agent, write_folder

ASKS = {"name": "echo", "description": "Repeats.", "version": "1.0", "requires_approval": True}


def approved_echo(cli, home: Path, *, config: dict[str, object] | None = None) -> None:
    write_folder(home / "sub_graphs", "echo", config=config)
    assert cli("tools", "approve", "echo", cwd=home).returncode == 0


def test_json_in_the_envelope_out_and_words_in_a_readable_line_out(cli, tmp_path: Path):
    approved_echo(cli, tmp_path)

    structured = cli("run", "echo", "say", "--json", '{"text": "hi", "times": 2}', cwd=tmp_path)
    words = cli("run", "echo", "text: hello, there, times: 3", cwd=tmp_path)
    sentence = cli("run", "echo", "say", "a whole sentence", cwd=tmp_path)

    assert structured.returncode == 0, structured.stderr
    assert "No model configured" not in structured.stderr, "--json needs no model: no note"
    assert "semantic search is off" not in structured.stderr, "ORCHESTRATOR_EMBEDDINGS=none chose it"
    assert "No model configured" in sentence.stderr, "a sentence is read by a model"
    envelope = json.loads(structured.stdout)
    assert envelope["success"] is True and envelope["message"] == "hi hi"
    assert envelope["metadata"]["operation"] == "echo.say" and envelope["error"] is None
    assert set(envelope["metadata"]) == {
        "operation", "tool", "action", "request_id", "timestamp", "duration_ms", "provider",
        "result_handle",
    }
    assert envelope["metadata"]["result_handle"] is None, "a short result is not kept apart"
    assert words.returncode == 0 and words.stdout.strip() == "hello, there hello, there hello, there"
    assert sentence.returncode == 0 and sentence.stdout.strip() == "a whole sentence"


def test_a_result_too_long_for_a_model_comes_whole_and_requests_show_names_its_handle(
    cli, tmp_path: Path
):
    approved_echo(cli, tmp_path)
    user = f"ann-{tmp_path.name[-6:]}"
    part = "".join(f"{n:07d}." for n in range(5000))  # 40,000 characters

    done = cli("run", "echo", "say", "--json", json.dumps({"text": part, "times": 5}), "-u", user, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["message"] == " ".join([part] * 5), "the whole result, 200,004 characters"
    handle = envelope["metadata"]["result_handle"]
    assert handle.startswith("result:")
    shown = cli("requests", "show", envelope["metadata"]["request_id"], "-u", user, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"whole result kept as {handle}" in shown.stdout


async def test_the_size_limit_and_the_days_of_kept_results_are_settings(
    cli, tmp_path: Path, database: Database
):
    approved_echo(cli, tmp_path)
    user = f"ann-{tmp_path.name[-6:]}"
    settings = {"ORCHESTRATOR_LARGE_RESULT_MAX_BYTES": "20000", "ORCHESTRATOR_LARGE_RESULT_DAYS": "2"}

    done = cli(
        "run", "echo", "say", "--json", json.dumps({"text": "z" * 30_000}), "-u", user,
        cwd=tmp_path, env_extra=settings,
    )

    handle = json.loads(done.stdout)["metadata"]["result_handle"]
    async with database.user_transaction(user) as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT kept_chars, total_chars, extract(epoch FROM expires_at - created_at) / 86400 AS days "
                    "FROM large_results WHERE handle = :h"
                ),
                {"h": handle},
            )
        ).one()
    assert row.kept_chars == 20_000 and row.total_chars > 30_000
    assert round(float(row.days), 3) == 2.0


def test_a_failure_is_an_envelope_with_its_error_and_a_nonzero_status(cli, tmp_path: Path):
    approved_echo(cli, tmp_path)

    invalid = cli("run", "echo", "say", "--json", '{"text": "hi", "times": 9}', cwd=tmp_path)
    missing = cli("run", "echo", "times: 2", cwd=tmp_path)
    not_json = cli("run", "echo", "--json", "[1, 2]", cwd=tmp_path)

    assert invalid.returncode == 1
    error = json.loads(invalid.stdout)["error"]
    assert error["code"] == "invalid_arguments" and "times" in error["message"]
    assert missing.returncode == 1
    assert missing.stderr.strip().endswith("error: echo.say: text (What to repeat.) is missing")
    assert not_json.returncode == 1 and "one JSON object" in not_json.stderr


def test_a_folder_that_is_not_approved_is_refused_saying_how_to_approve_it(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")

    refused = cli("run", "echo", "text: hi", cwd=tmp_path)
    unknown = cli("run", "nowhere", "text: hi", cwd=tmp_path)

    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        "error: The tool folder 'echo' is not approved: approve it with "
        "`orchestrator tools approve echo` (or at the prompt of `orchestrator chat`)"
    )
    assert unknown.returncode == 1 and "No tool folder named 'nowhere'" in unknown.stderr


def test_a_nested_shipped_action_runs_by_its_path(cli, tmp_path: Path):
    copy_shipped(tmp_path)
    for name in ("personal_assistant_agent", "task_agent"):
        assert cli("tools", "approve", name, cwd=tmp_path).returncode == 0, name
    path = "personal_assistant_agent/task_agent"
    user = f"ann-{tmp_path.name[-6:]}"

    added = cli("run", path, "add", "title: Buy milk, due: 2026-12-01", "-u", user, cwd=tmp_path)
    listed = cli("run", path, "list", "--json", "{}", "-u", user, cwd=tmp_path)

    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[0].startswith("Added task #1: Buy milk")
    envelope = json.loads(listed.stdout)
    assert [task["title"] for task in envelope["data"]] == ["Buy milk"]
    assert envelope["metadata"]["operation"] == "task_agent.list"


async def test_each_run_is_a_request_in_the_log_under_its_user(cli, tmp_path: Path, database: Database):
    approved_echo(cli, tmp_path)
    user = f"bob-{tmp_path.name[-6:]}"

    done = cli("run", "echo", "say", "--json", '{"text": "logged"}', "-u", user, cwd=tmp_path)

    request_id = json.loads(done.stdout)["metadata"]["request_id"]
    async with database.user_transaction(user) as connection:
        row = (
            await connection.execute(
                text("SELECT tool, action, status, session_id FROM requests WHERE request_id = :r"),
                {"r": request_id},
            )
        ).one()
    assert (row.tool, row.action, row.status) == ("echo", "say", "closed")
    assert row.session_id.startswith("run-")


def test_a_sensitive_action_asks_as_in_chat_and_yes_approves_it(cli, tmp_path: Path):
    approved_echo(cli, tmp_path, config=ASKS)

    approved = cli("run", "echo", "text: go", cwd=tmp_path, stdin="y\n")
    rejected = cli("run", "echo", "text: go", cwd=tmp_path, stdin="n too risky\n")
    scripted = cli("run", "echo", "text: go", "--yes", cwd=tmp_path)

    assert approved.returncode == 0 and approved.stdout.strip() == "go", approved.stderr
    assert "echo_say" in approved.stderr, "the question was shown"
    assert rejected.returncode == 1
    assert "The user rejected this call: too risky" in rejected.stdout
    assert scripted.returncode == 0 and scripted.stdout.strip() == "go"


async def test_a_sentence_is_read_by_the_local_servers_structured_output_and_counted(
    cli, tmp_path: Path, database: Database
):
    approved_echo(cli, tmp_path)
    user = f"cy-{tmp_path.name[-6:]}"
    filled = RawToolCall.of("echo_say", {"text": "good morning", "times": 2})
    with OpenAICompatibleServer([RawReply(tool_calls=[filled], usage=Usage(7, 5))]) as server:
        done = cli(
            "run", "echo", "say good morning, twice please", "-u", user, cwd=tmp_path,
            env_extra=server_env(server),
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "good morning good morning"
    (request,) = server.requests  # the structured output's request, and no other model call
    assert request["messages"][-1]["content"] == "say good morning, twice please"
    async with database.user_transaction(user) as connection:
        counted = (
            await connection.execute(
                text(
                    "SELECT u.kind, u.input_tokens, u.output_tokens FROM request_usage u"
                    " JOIN requests r ON r.session_id = u.session_id WHERE r.tool = 'echo'"
                )
            )
        ).all()
    assert [tuple(row) for row in counted] == [("model", 7, 5)], "reading the words is the run's usage"


def test_a_folder_offered_from_its_manifest_runs_its_action_imported_once(cli, tmp_path: Path):
    # Issue 36: the second run finds the folder's manifest; `run` imports the folder it runs.
    imports = tmp_path / "imports.log"
    counting = f"with open({str(imports)!r}, 'a') as log:\n    log.write('imported\\n')\n"
    write_folder(tmp_path / "sub_graphs", "echo", code=counting + ECHO_TOOL)
    assert cli("tools", "approve", "echo", cwd=tmp_path).returncode == 0

    first = cli("run", "echo", "say", "--json", '{"text": "one"}', cwd=tmp_path)
    second = cli("run", "echo", "text: two, times: 2", cwd=tmp_path)

    assert first.returncode == 0 and json.loads(first.stdout)["message"] == "one"
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "two two"
    assert imports.read_text().splitlines() == ["imported", "imported"]  # once a run
    wait_for_manifests()
    assert any((user_data_dir() / MANIFEST_DIR).iterdir())


def test_run_json_builds_the_model_only_for_an_agent_that_calls_it(cli, tmp_path: Path):
    """A model LangChain cannot make stops no tool's action; the agent that calls it says why, in its envelope."""
    approved_echo(cli, tmp_path)
    parrot_agent(tmp_path / "sub_graphs")
    for folder in ("parrot", "parrot/echo"):
        assert cli("tools", "approve", folder, cwd=tmp_path).returncode == 0
    unusable = {"ORCHESTRATOR_MODEL": "nosuch:model", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}

    tool = cli("run", "echo", "say", "--json", '{"text": "hi"}', cwd=tmp_path, env_extra=unusable)
    agent = cli("run", "parrot", "--json", '{"request": "say hi"}', cwd=tmp_path, env_extra=unusable)

    assert tool.returncode == 0, tool.stderr
    assert json.loads(tool.stdout)["message"] == "hi"
    assert agent.returncode == 1
    envelope = json.loads(agent.stdout)
    assert envelope["success"] is False
    assert "ORCHESTRATOR_MODEL='nosuch:model': `nosuch` is no provider LangChain knows" in envelope["message"]
