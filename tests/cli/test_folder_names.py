"""One way to name a folder (issue 42, item 11): every command takes every form `tools list`
or an error prints, and `tools approve` settles an MCP server's tools without a chat."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env
from tests.mcp.test_cli import offered
from tests.mcp.test_folders import calls, fixture_folder
from tests.tool_folders import copy_shipped

NESTED = "personal_assistant_agent/src/sub_graphs/task_agent"


def forms(home: Path) -> list[str]:
    """Every way a user meets the nested task_agent's name."""
    listed = f"sub_graphs/{NESTED}"  # as `tools list` prints it, from the home
    return ["task_agent", "personal_assistant_agent/task_agent", NESTED, listed, str(home / listed)]


@pytest.mark.parametrize("form", range(5))
def test_approve_show_run_and_revoke_take_every_form_of_a_nested_folder(cli, tmp_path: Path, form: int):
    copy_shipped(tmp_path)
    name = forms(tmp_path)[form]
    assert cli("tools", "approve", "personal_assistant_agent", cwd=tmp_path).returncode == 0

    approved = cli("tools", "approve", name, cwd=tmp_path)
    shown = cli("tools", "show", name, "--json", cwd=tmp_path)
    ran = cli("run", name, "list", "--json", "{}", cwd=tmp_path)
    revoked = cli("tools", "revoke", name, cwd=tmp_path)

    assert approved.returncode == 0 and "approved: task_agent" in approved.stdout, approved.stderr
    assert shown.returncode == 0 and json.loads(shown.stdout)["key"] == NESTED, shown.stderr
    assert ran.returncode == 0 and json.loads(ran.stdout)["success"] is True, ran.stderr
    assert revoked.returncode == 0 and "revoked: task_agent" in revoked.stdout, revoked.stderr


def test_the_command_a_refusal_suggests_is_one_that_works(cli, tmp_path: Path):
    copy_shipped(tmp_path)
    suggested = []
    for _ in range(2):  # the parent first, then the folder itself
        refused = cli("run", "task_agent", "list", "--json", "{}", cwd=tmp_path)
        assert refused.returncode == 1
        command = re.search(r"`orchestrator (tools approve [^`]+)`", refused.stderr.splitlines()[-1])
        assert command is not None, refused.stderr
        suggested.append(command.group(1))
        assert cli(*command.group(1).split(), cwd=tmp_path).returncode == 0

    ran = cli("run", "task_agent", "list", "--json", "{}", cwd=tmp_path)

    assert suggested == [
        "tools approve personal_assistant_agent", "tools approve personal_assistant_agent/task_agent"
    ]
    assert ran.returncode == 0, ran.stderr


def test_tools_approve_shows_and_approves_an_mcp_servers_tools_without_a_chat(cli, tmp_path: Path):
    control = tmp_path / "control"
    fixture_folder(tmp_path / "sub_graphs", "fx", control)

    approved = cli("tools", "approve", "fx", cwd=tmp_path)
    with OpenAICompatibleServer([[("fx_echo", {"text": "hello"})], "It said hello."]) as server:
        asked = cli("ask", "say hello", cwd=tmp_path, env_extra=server_env(server))

    assert approved.returncode == 0, approved.stderr
    assert "New MCP server: fx" in approved.stdout, "what the approval covers is shown first"
    assert "echo  Repeat the text." in approved.stdout
    assert "approved: the MCP server's 9 tool(s) above, as fx gives them now" in approved.stdout
    assert asked.returncode == 0, asked.stderr
    assert "New MCP server" not in asked.stderr, "nothing is asked again"
    assert "fx_echo" in offered(server)
    assert [call["args"] for call in calls(control)] == [{"text": "hello"}]
