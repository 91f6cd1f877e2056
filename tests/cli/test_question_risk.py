"""Each question says its risk level and urgency: from the folder, the action, or the call.

Shown at the question in the terminal, given in `ask --json`, kept in the
request log with the decision (see tests/dispatch/test_hitl.py for the log).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.conversation.turns import PendingQuestion
from orchestrator.errors import ToolLoadError
from orchestrator.folders.risk_marks import action_risks
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.terminal.answers import describe
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.tools.hitl import Question
from tests.helpers import server_env
from tests.tool_folders import write_folder

VAULT = '''
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Entry(BaseModel):
    name: str


class Vault(Tool):
    @action
    async def wipe(self, params: Entry, request: ToolRequest) -> ToolResult:
        """Wipe an entry."""
        return request.result("wiped " + params.name)

    @action(urgency="low")
    async def peek(self, params: Entry, request: ToolRequest) -> ToolResult:
        """Look at an entry."""
        return request.result("peeked " + params.name)
'''
VAULT_CONFIG = {
    "name": "vault",
    "description": "The vault.",
    "version": "1",
    "requires_approval": True,
    "risk_level": "high",
    "urgency": "high",
    "action_risk": {"wipe": {"risk_level": "critical"}},
}


def test_a_question_says_the_risk_its_folder_and_its_action_give_at_the_terminal_and_in_ask_json(
    cli, tmp_path: Path
):
    write_folder(tmp_path / "sub_graphs", "vault", config=VAULT_CONFIG, code=VAULT)
    script = [[("vault_wipe", {"name": "a"}), ("vault_peek", {"name": "b"})], "Done."]
    with OpenAICompatibleServer(script) as server:
        done = cli(
            "ask", "--answers-from-stdin", "--json", "tidy the vault", cwd=tmp_path,
            stdin="y\ny\nn not now\n", env_extra=server_env(server),
        )

    assert done.returncode == 0, done.stderr
    questions = json.loads(done.stdout)["questions"]
    assert [(q["tool"], q["risk_level"], q["urgency"], q["decision"]) for q in questions] == [
        # wipe: its own line in action_risk, the folder's urgency
        ("vault_wipe", "critical", "high", "approve"),
        # peek: the folder's risk, its author's urgency
        ("vault_peek", "high", "low", "reject"),
    ]
    assert "risk: critical · urgency: high" in done.stderr
    assert "risk: high · urgency: low" in done.stderr


def test_a_question_without_a_risk_says_the_defaults():
    question = Question(
        kind="approval", request_id="r1", agent_path=[],
        action={"name": "files_delete", "args": {"path": "a"}}, allowed=["approve", "reject"],
    )
    pending = PendingQuestion("i1", question)

    assert "    risk: medium · urgency: normal" in describe(pending, 1, 1)
    shown = pending.to_json()
    assert (shown["risk_level"], shown["urgency"]) == ("medium", "normal")


def test_action_risk_naming_no_action_of_the_tool_is_refused():
    config = ToolConfig.model_validate({**VAULT_CONFIG, "action_risk": {"wpie": {"urgency": "low"}}})

    with pytest.raises(ToolLoadError, match="action_risk names 'wpie'"):
        action_risks("vault", config, known=["wipe", "peek"])


def test_a_risk_level_not_of_the_four_is_a_configuration_error():
    assert ToolConfig.model_validate(VAULT_CONFIG).risk_level == "high"
    with pytest.raises(ValueError, match="risk_level"):
        ToolConfig.model_validate({**VAULT_CONFIG, "risk_level": "extreme"})
