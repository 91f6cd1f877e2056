"""The shipped personal assistant: a two-level tree, real SMTP, a per-user task list."""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator
from email import message_from_bytes
from pathlib import Path
from uuid import uuid4

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Database, Storage
from orchestrator.store.requests import request_tree
from orchestrator.testing import call_tools, load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.helpers import EventLog
from tests.tool_folders import SHIPPED, copy_shipped, write_folder

ASSISTANT = SHIPPED / "personal_assistant_agent"
EMAIL = ASSISTANT / "src" / "sub_graphs" / "email_agent"
TASKS = ASSISTANT / "src" / "sub_graphs" / "task_agent"


class Mailbox:
    """An aiosmtpd handler that keeps what it receives, and who logged in."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self.logins: list[str] = []

    async def handle_DATA(self, server: object, session: object, envelope: Envelope) -> str:  # noqa: N802
        self.envelopes.append(envelope)
        return "250 Message accepted"

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        if isinstance(auth_data, LoginPassword) and auth_data.password == b"s3cret":
            self.logins.append(auth_data.login.decode())
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Mailbox]:
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(
        mailbox,
        hostname="127.0.0.1",
        port=port,
        authenticator=mailbox.authenticate,
        auth_require_tls=False,
    )
    controller.start()
    for name, value in {
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(port),
        "SECURITY": "none",
        "FROM_ADDRESS": "assistant@example.org",
        "SMTP_USERNAME": "assistant",
        "SMTP_PASSWORD": "s3cret",
    }.items():
        monkeypatch.setenv(f"EMAIL_AGENT_{name}", value)
    yield mailbox
    controller.stop()


def request(action: str, user: str = "ada", **parameters: object) -> ToolRequest:
    return ToolRequest(request_id="r1", action=action, parameters=parameters, user_id=user)


async def test_email_is_received_by_the_smtp_server(smtp_server: Mailbox):
    email = load_tool_folder(EMAIL)

    result = await email.execute(
        request("send", to=["bob@example.com"], cc=["carol@example.com"], subject="Hi", body="See you at 5.")
    )

    assert result.status == "success" and "bob@example.com" in result.message
    [envelope] = smtp_server.envelopes
    assert envelope.mail_from == "assistant@example.org"
    assert envelope.rcpt_tos == ["bob@example.com", "carol@example.com"]
    received = message_from_bytes(envelope.content)
    assert received["Subject"] == "Hi"
    assert received.get_payload().strip() == "See you at 5."
    assert smtp_server.logins == ["assistant"]


async def test_email_rejects_bad_addresses_before_sending(smtp_server: Mailbox):
    email = load_tool_folder(EMAIL)
    with pytest.raises(InvalidToolArgumentsError, match="'bob at example' is not an email address"):
        await email.execute(request("send", to=["bob at example"], subject="Hi", body="x"))
    assert smtp_server.envelopes == []


async def test_email_settings_in_the_dotenv_file_are_used(
    smtp_server: Mailbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    # The settings only in `.env` of the orchestrator home (ORCHESTRATOR_HOME is tmp_path here).
    dotenv = [f"{name}={value}" for name, value in os.environ.items() if name.startswith("EMAIL_AGENT_")]
    (tmp_path / ".env").write_text("\n".join(dotenv) + "\n")
    for line in dotenv:
        monkeypatch.delenv(line.partition("=")[0])
    email = load_tool_folder(EMAIL)

    result = await email.execute(request("send", to=["bob@example.com"], subject="Hi", body="x"))

    assert result.status == "success", result.message
    assert [e.mail_from for e in smtp_server.envelopes] == ["assistant@example.org"]
    assert smtp_server.logins == ["assistant"]


async def test_email_without_a_sender_says_how_to_configure_it():
    email = load_tool_folder(EMAIL)
    with pytest.raises(ToolError, match="email_agent is not configured: from_address: Field required"):
        await email.execute(request("send", to=["bob@example.com"], subject="Hi", body="x"))


async def test_email_server_down_is_a_recoverable_tool_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EMAIL_AGENT_SMTP_HOST", "127.0.0.1")
    monkeypatch.setenv("EMAIL_AGENT_SMTP_PORT", str(free_port()))
    monkeypatch.setenv("EMAIL_AGENT_FROM_ADDRESS", "a@example.org")
    email = load_tool_folder(EMAIL)
    with pytest.raises(ToolError, match="Could not reach the SMTP server 127.0.0.1") as caught:
        await email.execute(request("send", to=["bob@example.com"], subject="Hi", body="x"))
    assert caught.value.code == "server_unreachable" and caught.value.recoverable


async def test_task_list_per_user(database: Database):
    tasks: Tool = load_tool_folder(TASKS, database=database)

    added = await tasks.execute(request("add", title="Buy milk", due="2026-12-01"))
    await tasks.execute(request("add", title="Call mum"))
    await tasks.execute(request("add", user="bob", title="Bob's own"))
    done = await tasks.execute(request("complete", task_id=1))
    listed = await tasks.execute(request("list"))
    everything = await tasks.execute(request("list", include_done=True))

    assert added.message == "Added task #1: Buy milk"
    assert added.data == {"task_id": 1, "title": "Buy milk", "due": "2026-12-01", "done": False}
    assert done.message == "Completed task #1: Buy milk"
    assert listed.message == "#2 Call mum"
    assert everything.message == "#1 Buy milk (due 2026-12-01) [done]\n#2 Call mum"
    assert (await tasks.execute(request("list", user="bob"))).message == "#1 Bob's own"
    with pytest.raises(ToolError, match="There is no task #9"):
        await tasks.execute(request("complete", task_id=9))
    with pytest.raises(ToolError, match="There is no task #1"):  # bob's #1 is not ada's
        await tasks.execute(request("complete", user="carol", task_id=1))


async def test_tasks_are_edited_and_deleted(database: Database):
    tasks: Tool = load_tool_folder(TASKS, database=database)
    ann, bob = f"ann-{uuid4().hex[:6]}", f"bob-{uuid4().hex[:6]}"  # the database is the session's
    await tasks.execute(request("add", ann, title="Buy milk", due="2026-12-01"))
    await tasks.execute(request("add", bob, title="Bob's own"))

    renamed = await tasks.execute(request("edit", ann, task_id=1, title="Buy oat milk", due="2026-12-02"))
    done = await tasks.execute(request("edit", ann, task_id=1, done=True, clear_due=True))
    reopened = await tasks.execute(request("edit", ann, task_id=1, done=False))

    assert renamed.message == "Changed task: #1 Buy oat milk (due 2026-12-02)"
    assert done.data == {"task_id": 1, "title": "Buy oat milk", "due": None, "done": True}
    assert reopened.message == "Changed task: #1 Buy oat milk"
    with pytest.raises(ToolError, match="nothing to change") as nothing:
        await tasks.execute(request("edit", ann, task_id=1))
    assert nothing.value.code == "invalid_arguments"
    with pytest.raises(ToolError, match="There is no task #1") as missing:  # bob's #1 is not carol's
        await tasks.execute(request("edit", f"carol-{uuid4().hex[:6]}", task_id=1, title="Mine now"))
    assert missing.value.code == "not_found" and not missing.value.recoverable

    deleted = await tasks.execute(request("delete", ann, task_id=1))
    assert deleted.message == "Deleted task #1: Buy oat milk"
    assert (await tasks.execute(request("list", ann, include_done=True))).message == "No tasks."
    assert (await tasks.execute(request("list", bob))).message == "#1 Bob's own"
    with pytest.raises(ToolError, match="There is no task #1") as gone:
        await tasks.execute(request("delete", ann, task_id=1))
    assert gone.value.code == "not_found"


def test_deleting_a_task_asks_first():
    tasks = load_tool_folder(TASKS)
    sensitive = {name for name, spec in tasks.actions.items() if spec.sensitive}
    assert sensitive == {"delete"}


async def test_a_due_date_in_words_is_read_against_today(database: Database):
    from datetime import date, timedelta

    tasks: Tool = load_tool_folder(TASKS, database=database)
    ann = f"ann-{uuid4().hex[:6]}"
    today = date.today()
    friday = today + timedelta(days=(4 - today.weekday()) % 7 or 7)

    tomorrow = await tasks.execute(request("add", ann, title="Call mum", due="tomorrow"))
    by_friday = await tasks.execute(request("add", ann, title="Report", due="next Friday"))
    moved = await tasks.execute(request("edit", ann, task_id=1, due="in 3 days"))

    assert tomorrow.data["due"] == (today + timedelta(days=1)).isoformat()
    assert by_friday.data["due"] == friday.isoformat(), "the coming Friday, never a past one"
    assert moved.data["due"] == (today + timedelta(days=3)).isoformat()
    with pytest.raises(ToolError, match="cannot read 'someday' as a date") as unread:
        await tasks.execute(request("add", ann, title="Later", due="someday"))
    assert unread.value.code == "invalid_arguments"


async def test_task_list_needs_the_database():
    with pytest.raises(ToolError, match="task_agent needs the database"):
        await load_tool_folder(TASKS).execute(request("list"))


async def test_two_level_call_carries_request_ids_down_the_tree(
    scripted, tmp_path: Path, database_url: str, database: Database, caplog
):
    settings = load_settings(
        sub_graphs_dir=copy_shipped(tmp_path),
        data_dir=tmp_path / "data",
        database_url=database_url,
        embeddings="none",
    )
    model = scripted(
        call_tools(("personal_assistant_agent_ask", {"request": "Remember to buy milk"})),
        call_tools(("task_agent_add", {"title": "Buy milk"})),  # the assistant's own model call
        "Added task #1: Buy milk.",
        "Done: I added 'Buy milk' to your list.",
    )
    storage = await Storage.open(settings)
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
    session = runtime.session(user_id="dora")  # the module's database is shared: a user of its own
    events = EventLog()

    with caplog.at_level(logging.INFO, logger="orchestrator.graph.builder"):
        result = await session.run("Remind me to buy milk", on_event=events)
    await storage.close()

    assert result.answer == "Done: I added 'Buy milk' to your list."
    assert model.bound_tools == [
        "current_time", "calculator", "ask_human", "request_authorization", "search_messages",
        "database_agent_describe_schema", "database_agent_explain", "database_agent_list_schemas",
        "database_agent_query", "database_agent_sample_rows", "database_agent_write",
        "personal_assistant_agent_ask", "research_agent_ask",
        "s3_agent_copy", "s3_agent_delete", "s3_agent_download", "s3_agent_head",
        "s3_agent_list", "s3_agent_move", "s3_agent_presign", "s3_agent_upload",
        "slack_agent_channels", "slack_agent_post", "slack_agent_read", "slack_agent_read_thread",
        "create_execution_plan",
    ]
    [assistant] = [agent for agent in runtime.sub_agents if agent.tool.name == "personal_assistant_agent"]
    inner_tools = {t.name for t in assistant.tool.tools}
    assert inner_tools == {
        "calendar_agent_create", "calendar_agent_delete", "calendar_agent_list",
        "calendar_agent_move", "calendar_agent_update",
        "email_agent_list_messages", "email_agent_read", "email_agent_search", "email_agent_send",
        "task_agent_add", "task_agent_complete", "task_agent_delete", "task_agent_edit",
        "task_agent_list",
    }
    calls = {r.tool: r for r in caplog.records if hasattr(r, "tool")}
    outer, inner = calls["personal_assistant_agent_ask"], calls["task_agent_add"]
    assert outer.parent_request_id is None
    assert outer.request_id == result.tool_calls[0].request_id
    assert inner.parent_request_id == outer.request_id
    assert {(e["tool"], e["depth"]) for e in events if e["kind"] == "tool"} == {
        ("personal_assistant_agent_ask", 0),
        ("task_agent_add", 1),
    }
    tree = await request_tree(database, outer.request_id, user_id="dora")
    assert [(n.depth, n.tool, n.action, n.status, n.outcome, n.parent_request_id) for n in tree] == [
        (0, "personal_assistant_agent", "ask", "closed", "completed", None),
        (1, "task_agent", "add", "closed", "completed", outer.request_id),
    ]
    assert tree[1].parameters == {"title": "Buy milk"}
    assert tree[1].message == "Added task #1: Buy milk"
    assert await request_tree(database, outer.request_id, user_id="bob") == []
    assert [m.text for m in model.received[1][1:]] == ["Remember to buy milk"], (
        "the assistant sees only the request it was handed"
    )


async def test_an_agent_may_run_its_own_model(scripted, tmp_path: Path):
    root = tmp_path / "sub_graphs"
    code = "from orchestrator.tools import AgentTool\n\nclass Helper(AgentTool):\n    pass\n"
    config = {
        "name": "helper",
        "description": "Helps.",
        "version": "1",
        "llm": {"inherit": "local", "model": "offline"},
    }
    write_folder(root, "helper", config=config, code=code)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    model = scripted(call_tools(("helper_ask", {"request": "anything"})), "ok")
    session = Orchestrator.create(settings, model=model, ask=lambda folder, status: True).session(user_id="u")

    await session.run("go")

    reply = json.loads(model.received[1][-1].text)["message"]
    assert "I am the built-in offline model" in reply, "the helper answered with its own model"
