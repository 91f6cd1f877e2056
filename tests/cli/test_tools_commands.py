"""Tool folders through the command line: the startup prompt, `tools ...`, `new-agent`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env
from tests.tool_folders import copy_shipped, marker_code, write_folder


def test_approve_at_the_prompt_then_call_the_tool(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")
    script = [[("echo_say", {"text": "hello", "times": 2})], "It said hello twice."]
    with OpenAICompatibleServer(script) as server:
        first = cli("chat", cwd=tmp_path, stdin="y\nsay hello twice\n", env_extra=server_env(server))

    assert first.returncode == 0, first.stderr
    assert "New tool folder: echo 1.0" in first.stderr and "path: sub_graphs/echo" in first.stderr
    assert first.stdout.strip() == "It said hello twice."
    assert "echo_say" in {t["function"]["name"] for t in server.requests[0]["tools"]}
    tool_reply = server.requests[1]["messages"][-1]
    assert json.loads(tool_reply["content"])["message"] == "hello hello"

    with OpenAICompatibleServer(["Still here."]) as server:
        second = cli("ask", "hi", cwd=tmp_path, env_extra=server_env(server))
    assert "New tool folder" not in second.stderr, "an approval is remembered"
    assert "echo_say" in {t["function"]["name"] for t in server.requests[0]["tools"]}


def test_a_folder_approved_at_the_prompt_whose_code_fails_is_listed_with_why(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "broken", code="import not_a_module_anywhere\n")

    chat = cli("chat", cwd=tmp_path, stdin="y\n/exit\n")
    listed = cli("tools", "list", cwd=tmp_path)
    as_json = json.loads(cli("tools", "list", "--json", cwd=tmp_path).stdout)

    assert chat.returncode == 0, chat.stderr
    assert listed.stdout.splitlines()[0].startswith("broken 1.0  new  ")
    why = "it imports not_a_module_anywhere, which is not installed here"
    assert listed.stdout.splitlines()[1].startswith(
        f"  approved before, but its code could not be loaded: {why}"
    ), listed.stdout
    [broken] = as_json["tools"]
    assert broken["status"] == "new" and broken["load_failed"].startswith(why)

    (tmp_path / "sub_graphs" / "broken" / "broken_tool.py").write_text("import json\n")
    changed = cli("tools", "list", cwd=tmp_path)
    assert "could not be loaded" not in changed.stdout, "changed content was never tried"


def test_end_of_input_at_the_prompt_approves_nothing_and_imports_nothing(cli, tmp_path: Path):
    marker = tmp_path / "imported"
    write_folder(tmp_path / "sub_graphs", "spy", code=marker_code(marker))

    done = cli("ask", "--json", "what is 1+1", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "(end of input: not approved)" in done.stderr
    assert json.loads(done.stdout)["tool_calls"][0]["name"] == "calculator"
    assert not marker.exists()
    assert not (tmp_path / "data" / "tool_registry").exists()


def test_piped_chat_keeps_a_line_that_is_not_an_answer(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")
    with OpenAICompatibleServer(["Hello.", "Goodbye."]) as server:
        done = cli("chat", cwd=tmp_path, stdin="hi\nbye\n", env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert "not a y/n answer: not approved, asked again next time" in done.stderr
    assert [r["messages"][-1]["content"] for r in server.requests] == ["hi", "bye"]
    assert done.stdout.splitlines() == ["Hello.", "Goodbye."]
    listing = json.loads(cli("tools", "list", "--json", cwd=tmp_path).stdout)
    assert listing["tools"][0]["status"] == "new", "an unclear answer is not remembered"


def test_a_clear_piped_answer_is_remembered(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")
    done = cli("ask", "--answers-from-stdin", "hi", cwd=tmp_path, stdin="n\n")
    assert done.returncode == 0, done.stderr
    listing = json.loads(cli("tools", "list", "--json", cwd=tmp_path).stdout)
    assert listing["tools"][0]["status"] == "denied"


def test_tools_list_approve_and_revoke(cli, tmp_path: Path):
    marker = tmp_path / "imported"
    root = copy_shipped(tmp_path)
    write_folder(root, "spy", code=marker_code(marker))
    write_folder(root, "broken", config="name: [\n")

    listing = json.loads(cli("tools", "list", "--json", cwd=tmp_path).stdout)

    assert [(t["name"], t["depth"], t["status"]) for t in listing["tools"]] == [
        ("database_agent", 0, "new"),
        ("personal_assistant_agent", 0, "new"),
        ("calendar_agent", 1, "new"),
        ("email_agent", 1, "new"),
        ("task_agent", 1, "new"),
        ("research_agent", 0, "new"),
        ("document_analysis_agent", 1, "new"),
        ("web_search_agent", 1, "new"),
        ("s3_agent", 0, "new"),
        ("slack_agent", 0, "new"),
        ("spy", 0, "new"),
    ]
    assert listing["problems"][0]["path"].endswith("broken")
    assert not marker.exists(), "listing never imports"

    approved = cli("tools", "approve", "task_agent", cwd=tmp_path)
    assert approved.returncode == 0 and "approved: task_agent 1.1.0" in approved.stdout
    revoked = cli("tools", "revoke", "spy", cwd=tmp_path)
    assert revoked.returncode == 0
    text = cli("tools", "list", cwd=tmp_path).stdout
    assert "  task_agent 1.1.0  approved  sub_graphs/personal_assistant_agent/src/sub_graphs/task_agent" in text
    assert "spy 1.0  denied  sub_graphs/spy" in text
    assert "skipped sub_graphs/broken: " in text

    missing = cli("tools", "approve", "nope", cwd=tmp_path)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "error: No tool folder named 'nope'; `orchestrator tools list` shows them."


def test_new_agent_creates_a_folder_whose_test_passes(cli, tmp_path: Path):
    created = cli("new-agent", "weather_bot", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    folder = tmp_path / "sub_graphs" / "weather_bot"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "README.md",
        "tests/pytest.ini",
        "tests/test_weather_bot.py",
        "tool_config.yaml",
        "weather_bot_tool.py",
    ]
    pytest = Path(sys.executable).parent / "pytest"
    assert created.stdout.strip().endswith(f"run its test with: {pytest} sub_graphs/weather_bot/tests")

    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "tests")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    assert "warning" not in tested.stdout.lower()

    listing = json.loads(cli("tools", "list", "--json", cwd=tmp_path).stdout)
    assert [(t["name"], t["status"]) for t in listing["tools"]] == [("weather_bot", "new")]

    again = cli("new-agent", "weather_bot", cwd=tmp_path)
    assert again.returncode == 1 and "already exists" in again.stderr
    invalid = cli("new-agent", "Weather-Bot", cwd=tmp_path)
    assert invalid.returncode == 1 and "not a valid tool name" in invalid.stderr


def test_chat_tools_command_shows_the_tree(cli, tmp_path: Path):
    copy_shipped(tmp_path)
    # database_agent, personal_assistant_agent (yes), calendar_agent, email_agent (yes), task_agent,
    # s3_agent, slack_agent
    done = cli("chat", cwd=tmp_path, stdin="n\ny\nn\ny\nn\nn\nn\n/tools\n")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:5]] == [
        "current_time", "calculator", "ask_human", "request_authorization", "search_messages"
    ]
    start = next(i for i, line in enumerate(lines) if line.startswith("personal_assistant_agent 1.0.0"))
    assert "sub_graphs/personal_assistant_agent" in lines[start]
    assert lines[start + 1].startswith("  personal_assistant_agent_ask  Hand this agent a request")
    assert lines[start + 2].startswith("  email_agent 1.1.0  sub_graphs/personal_assistant_agent/src/sub_graphs/email_agent")
    assert lines[start + 3].startswith("    email_agent_list_messages  List the newest messages of a mailbox")
    assert any(line.startswith("    email_agent_send  Send a plain-text email.") for line in lines[start + 4 :])
    assert not any("task_agent" in line for line in lines), "task_agent was refused"


def test_tools_approve_where_approvals_cannot_be_saved_is_one_line(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")
    read_only = {"ORCHESTRATOR_DATA_DIR": "/proc/orchestrator-data"}  # even root cannot write there

    done = cli("tools", "approve", "echo", cwd=tmp_path, env_extra=read_only)

    assert done.returncode == 2
    assert done.stderr.startswith("error: Cannot save the tool approvals in ")
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_agent_with_no_approved_tools_says_so_at_startup(cli, tmp_path: Path):
    copy_shipped(tmp_path)
    # database_agent, personal_assistant_agent (yes), and none of its three tools
    done = cli("ask", "--answers-from-stdin", "hi", cwd=tmp_path, stdin="n\ny\nn\nn\nn\n")
    assert done.returncode == 0, done.stderr
    assert (
        "note: personal_assistant_agent has no approved tools of its own "
        "(calendar_agent, email_agent, task_agent not approved): `orchestrator tools approve "
        "personal_assistant_agent/calendar_agent`, and likewise the others"
    ) in done.stderr
