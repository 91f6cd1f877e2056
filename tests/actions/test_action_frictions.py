"""What a new user met running actions (issue 42, item 13): an action named with no text runs
on its defaults, `as_node` reads words as `run` does, and an unconfigured agent says so
before anyone is asked to approve a call that could not run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from orchestrator import as_node
from orchestrator.errors import UserError
from orchestrator.folders.approvals import review_folders
from orchestrator.store.logins import Logins
from tests.actions.conftest import approve_all
from tests.actions.test_as_node import settings_on
from tests.integrations.folders import approved_copy
from tests.tool_folders import copy_shipped, write_folder

TASKS = "personal_assistant_agent/task_agent"


def test_an_action_named_with_no_text_runs_on_its_defaults(cli, tmp_path: Path):
    copy_shipped(tmp_path)
    for name in ("personal_assistant_agent", TASKS):
        assert cli("tools", "approve", name, cwd=tmp_path).returncode == 0
    write_folder(tmp_path / "sub_graphs", "echo")
    assert cli("tools", "approve", "echo", cwd=tmp_path).returncode == 0

    listed = cli("run", TASKS, "list", cwd=tmp_path)
    required = cli("run", "echo", "say", cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "No tasks."
    assert required.returncode == 1
    assert required.stderr.strip().endswith("error: echo.say: text (What to repeat.) is missing")


class Flow(TypedDict, total=False):
    request: str
    echoed: dict[str, object]


def echo_graph(settings: object, inputs: object):  # type: ignore[no-untyped-def]
    builder = StateGraph(Flow)
    builder.add_node("echo", as_node("echo", "say", inputs=inputs, output_key="echoed", settings=settings))  # type: ignore[arg-type]
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile()


def test_as_node_reads_the_request_in_words_as_run_does(
    tmp_path: Path, database_logins: Logins, closing_hosts: None
):
    write_folder(tmp_path / "sub_graphs", "echo")
    settings = settings_on(database_logins, tmp_path, tmp_path / "sub_graphs")
    review_folders(settings, approve_all)

    by_key = echo_graph(settings, "request").invoke({"request": "text: hi, times: 2"})
    by_function = echo_graph(settings, lambda state: state["request"]).invoke({"request": "text: yo"})
    with pytest.raises(UserError, match=r"echo\.say: text \(What to repeat\.\) is missing"):
        echo_graph(settings, "request").invoke({"request": "times: 2"})

    assert by_key["echoed"]["success"] and by_key["echoed"]["message"] == "hi hi"
    assert by_function["echoed"]["message"] == "yo"


def test_a_sensitive_action_of_an_unconfigured_agent_says_so_before_asking(cli, tmp_path: Path):
    approved_copy(cli, tmp_path, "slack_agent")
    post = json.dumps({"channel": "#general", "text": "Deploy done"})

    done = cli("run", "slack_agent", "post", "--json", post, cwd=tmp_path, stdin="y\n")

    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "not_configured"
    assert "set SLACK_AGENT_TOKEN in the environment" in error["message"]
    assert "slack_agent_post" not in done.stderr, "no approval question was shown"
