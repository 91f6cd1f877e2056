"""A tool searches the calling user's earlier messages: `self.context.search_messages(query, k)`
(issue 46, item 9), on the real embedded PostgreSQL, under row-level security."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import ToolError
from orchestrator.tools.base import ToolContext
from orchestrator.tools.context import NO_MESSAGES, RunContext, running_in
from tests.helpers import run_cli
from tests.tool_folders import write_folder

RECALL_TOOL = '''
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Query(BaseModel):
    query: str
    k: int = 5


class Recall(Tool):
    @action(Query)
    async def search(self, params: Query, request: ToolRequest) -> ToolResult:
        """Search the user's earlier messages."""
        found = await self.context.search_messages(params.query, params.k)
        return request.result(f"{len(found)} found", data=[m.content for m in found])
'''


def recall_folder(root: Path) -> None:
    config = {
        "name": "recall",
        "description": "Searches what the user said before.",
        "version": "1.0",
        "sandbox": {"isolation": "inline"},  # the orchestrator's database is in its process
    }
    write_folder(root / "sub_graphs", "recall", config=config, code=RECALL_TOOL)


def test_a_tool_finds_its_users_earlier_messages_and_never_anothers(cli, tmp_path: Path):
    recall_folder(tmp_path)
    assert run_cli("tools", "approve", "recall", cwd=tmp_path).returncode == 0
    for user, said in (("alice", "the lemonade recipe needs mint"), ("bob", "bob's lemonade is secret")):
        assert cli("ask", said, "--user", user, cwd=tmp_path).returncode == 0

    found = {}
    for user in ("alice", "bob", "carol"):
        done = cli("run", "recall", "search", "--json", '{"query": "lemonade"}', "--user", user, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        found[user] = json.loads(done.stdout)["data"]

    assert found["alice"] == ["the lemonade recipe needs mint"]
    assert found["bob"] == ["bob's lemonade is secret"]
    assert found["carol"] == []


async def test_outside_a_call_or_without_the_database_it_is_a_clear_tool_error(tmp_path: Path):
    context = ToolContext(data_dir=tmp_path)
    with pytest.raises(ToolError, match="needs the orchestrator's database") as outside:
        await context.search_messages("anything")
    with running_in(RunContext(user_id="u")), pytest.raises(ToolError) as without:
        await context.search_messages("anything")
    assert str(outside.value) == str(without.value) == NO_MESSAGES
