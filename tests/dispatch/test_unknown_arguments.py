"""Arguments no parameter declares are refused, never silently dropped (issue 42, item 12).

An email's `bcc` left out while the result says "sent" is a lie: the call is
refused before it runs, naming the unknown keys and the parameters there are,
from a model's call, from `run --json` and through `mcp serve`. An action whose
parameter model says it takes more (`extra="allow"`) gets them.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.sources.adapter import langchain_tools
from orchestrator.store.logins import Logins
from orchestrator.testing import call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from tests.helpers import make_session
from tests.mcp.test_serve import answer, approve, serve_env, stdio_session
from tests.tool_folders import write_folder

REFUSED = (
    "Invalid arguments for mail_send: it takes no 'bcc', 'reply_to' (its parameters: to, body); "
    "leave them out or use one of those"
)


class Send(BaseModel):
    to: str = Field(description="Who to write to.")
    body: str = ""


class Tagged(BaseModel):
    model_config = ConfigDict(extra="allow")  # its action takes any tag as a keyword

    name: str


class Mail(Tool):
    name: str = "mail"
    description: str = "Sends mail."
    sent: list[dict[str, object]] = Field(default_factory=list)

    @action(Send)
    async def send(self, params: Send, request: ToolRequest) -> ToolResult:
        """Send one message."""
        self.sent.append(params.model_dump())
        return request.result(f"Sent to {params.to}.")

    @action(Tagged)
    async def tag(self, params: Tagged, request: ToolRequest) -> ToolResult:
        """Tag something with any keywords."""
        return request.result(json.dumps(params.model_extra, sort_keys=True))


async def test_a_models_call_with_unknown_fields_is_refused_naming_them_and_nothing_runs(scripted):
    mail = Mail()
    model = scripted(
        call_tools(("mail_send", {"to": "bob", "bcc": "eve", "reply_to": "mallory"})),
        call_tools(("mail_tag", {"name": "x", "colour": "red"})),
        "Done.",
    )

    await make_session(model, langchain_tools(mail)).run("mail bob")

    refused, tagged = model.received[1][-1], model.received[2][-1]
    assert json.loads(refused.text)["message"] == REFUSED
    assert json.loads(refused.text)["error_code"] == "invalid_arguments"
    assert mail.sent == [], "nothing was sent"
    assert json.loads(tagged.text)["message"] == '{"colour": "red"}', "extra='allow' takes them"


def test_run_json_refuses_an_unknown_field_in_the_envelope(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")
    assert cli("tools", "approve", "echo", cwd=tmp_path).returncode == 0

    done = cli("run", "echo", "say", "--json", '{"text": "hi", "loud": true}', cwd=tmp_path)

    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "invalid_arguments"
    assert error["message"] == (
        "Invalid arguments for echo_say: it takes no 'loud' (its parameters: text, times); "
        "leave them out or use one of those"
    )


async def test_mcp_serve_refuses_an_unknown_field(tmp_path: Path, database_logins: Logins):
    write_folder(tmp_path / "sub_graphs", "echo")
    approve(tmp_path)

    async with stdio_session(tmp_path, serve_env(tmp_path, database_logins)) as session:
        refused = await session.call_tool("echo_say", {"text": "hi", "bcc": "eve"})

    assert refused.isError
    assert answer(refused)["error_code"] == "invalid_arguments"
    assert "it takes no 'bcc' (its parameters: text, times)" in str(answer(refused)["message"])
