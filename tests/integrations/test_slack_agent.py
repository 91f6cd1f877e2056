"""slack_agent against a server on 127.0.0.1 speaking Slack's Web API JSON (the real slack_sdk client)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.integrations.folders import approved_copy, free_port
from tests.integrations.slack_server import TOKEN, SlackServer
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "slack_agent"
GENERAL = "C0000GENERAL"


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackServer]:
    with SlackServer() as server:
        monkeypatch.setenv("SLACK_AGENT_BASE_URL", server.base_url)
        monkeypatch.setenv("SLACK_AGENT_TOKEN", TOKEN)
        server.add_message(GENERAL, "U0000ADA", "Standup at ten")
        server.add_message(GENERAL, "U0000BOB", "Coffee first")
        yield server


@functools.cache
def agent() -> Tool:
    return load_tool_folder(FOLDER)


async def call(action: str, **parameters: object):
    return await agent().execute(ToolRequest(request_id="r1", action=action, parameters=parameters))


async def test_post_and_read_a_channel_by_name_or_id(slack: SlackServer):
    posted = await call("post", channel="#general", text="Deploy done :rocket:")
    reply = await call("post", channel=GENERAL, text="Thanks", thread_ts=posted.data["ts"])
    read = await call("read", channel="general", limit=2)

    assert posted.message == f"Posted to #general (ts {posted.data['ts']})."
    assert posted.data["channel"] == GENERAL and posted.metadata == {"provider": "slack"}
    assert (
        "chat.postMessage",
        {"channel": GENERAL, "text": "Thanks", "thread_ts": posted.data["ts"]},
    ) in slack.calls
    assert reply.data["thread_ts"] == posted.data["ts"]
    assert [m["text"] for m in read.data["messages"]] == ["Thanks", "Deploy done :rocket:"]
    assert read.data["has_more"] is True
    assert read.message.splitlines()[1].endswith("U0000BOT: Deploy done :rocket:")


async def test_the_configured_channel_serves_calls_that_name_none(slack: SlackServer, monkeypatch):
    monkeypatch.setenv("SLACK_AGENT_CHANNEL", "#general")

    read = await call("read")

    assert [m["user"] for m in read.data["messages"]] == ["U0000BOB", "U0000ADA"]
    monkeypatch.delenv("SLACK_AGENT_CHANNEL")
    with pytest.raises(InvalidToolArgumentsError, match="Which channel?"):
        await call("read")


async def test_each_failure_is_a_clear_error(slack: SlackServer, monkeypatch):
    with pytest.raises(
        ToolError, match="There is no channel #nowhere that the bot can see"
    ) as unknown:
        await call("read", channel="#nowhere")
    with pytest.raises(ToolError, match="channel C0000MISSING: channel_not_found") as missing:
        await call("post", channel="C0000MISSING", text="hi")
    with pytest.raises(
        ToolError, match="Slack refused it: channel #random: not_in_channel"
    ) as refused:
        await call("post", channel="#random", text="hi")
    monkeypatch.setenv("SLACK_AGENT_TOKEN", "xoxb-revoked")
    with pytest.raises(ToolError, match="Slack refused the token: invalid_auth") as bad_token:
        await call("read", channel=GENERAL)
    monkeypatch.setenv("SLACK_AGENT_BASE_URL", f"http://127.0.0.1:{free_port()}/api/")
    with pytest.raises(ToolError, match="Could not reach Slack") as down:
        await call("read", channel=GENERAL)
    monkeypatch.delenv("SLACK_AGENT_TOKEN")
    with pytest.raises(ToolError, match="slack_agent is not configured: token: Field required"):
        await call("read", channel=GENERAL)

    assert {unknown.value.code, missing.value.code} == {"not_found"}
    assert (refused.value.code, bad_token.value.code) == ("refused", "bad_credentials")
    assert (down.value.code, down.value.recoverable) == ("server_unreachable", True)
    assert not bad_token.value.recoverable
    posted = [m for c in slack.channels.values() for m in c.messages if m["user"] == "U0000BOT"]
    assert posted == [], "nothing was posted"


def test_orchestrator_run_takes_json_and_words_and_a_post_asks(
    cli, slack: SlackServer, tmp_path: Path
):
    approved_copy(cli, tmp_path, "slack_agent")

    read = cli(
        "run",
        "slack_agent",
        "read",
        "--json",
        json.dumps({"channel": "#general", "limit": 5}),
        cwd=tmp_path,
    )
    words = cli("run", "slack_agent", "read", "channel: #general, limit: 1", cwd=tmp_path)
    rejected = cli(
        "run",
        "slack_agent",
        "post",
        "channel: #general, text: Ship it, now",
        cwd=tmp_path,
        stdin="n\n",
    )
    posted = cli(
        "run",
        "slack_agent",
        "post",
        "channel: #general, text: Ship it, now",
        cwd=tmp_path,
        stdin="y\n",
    )

    assert read.returncode == 0, read.stderr
    envelope = json.loads(read.stdout)
    assert [m["text"] for m in envelope["data"]["messages"]] == ["Coffee first", "Standup at ten"]
    assert (
        envelope["metadata"]["operation"] == "slack_agent.read"
        and envelope["metadata"]["provider"] == "slack"
    )
    assert words.returncode == 0 and words.stdout.splitlines()[0].endswith("U0000BOB: Coffee first")
    assert rejected.returncode == 1 and "The user rejected this call" in rejected.stdout
    assert "slack_agent_post" in rejected.stderr, "the question was shown"
    assert posted.returncode == 0, posted.stderr
    assert posted.stdout.startswith("Posted to #general")
    assert [args["text"] for method, args in slack.calls if method == "chat.postMessage"] == [
        "Ship it, now"
    ]
