"""slack_agent against a server on 127.0.0.1 speaking Slack's Web API JSON (the real slack_sdk client)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.integrations.folders import approved_copy, free_port
from tests.integrations.slack_server import TOKEN, Channel, SlackServer
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
    assert read.message.splitlines()[1].endswith(
        f"U0000BOT: Deploy done :rocket: [thread {posted.data['ts']}: 1 reply]"
    )


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
    assert words.returncode == 0 and words.stdout.splitlines()[0].endswith("Bobby: Coffee first")
    assert rejected.returncode == 1 and "The user rejected this call" in rejected.stdout
    assert "slack_agent_post" in rejected.stderr, "the question was shown"
    assert posted.returncode == 0, posted.stderr
    assert posted.stdout.startswith("Posted to #general")
    assert [args["text"] for method, args in slack.calls if method == "chat.postMessage"] == [
        "Ship it, now"
    ]


async def test_an_unreachable_server_is_one_clear_error_and_no_raw_sdk_lines(
    slack: SlackServer, monkeypatch, caplog: pytest.LogCaptureFixture
):
    monkeypatch.setenv("SLACK_AGENT_BASE_URL", f"http://127.0.0.1:{free_port()}/api/")

    with caplog.at_level(logging.DEBUG), pytest.raises(ToolError, match="Could not reach Slack") as down:
        await call("read", channel=GENERAL)

    assert (down.value.code, down.value.recoverable) == ("server_unreachable", True)
    loud = [r for r in caplog.records if r.name.startswith("slack_sdk") and r.levelno >= logging.WARNING]
    assert loud == []


async def test_read_a_thread_and_reply_in_it(slack: SlackServer):
    parent = slack.add_message(GENERAL, "U0000ADA", "Release on Friday?")
    slack.add_message(GENERAL, "U0000BOB", "Yes, after the freeze", thread_ts=parent)

    replied = await call("post", channel="#general", text="Works for me", thread_ts=parent)
    channel = await call("read", channel="#general", limit=1)
    thread = await call("read_thread", channel="#general", thread_ts=parent)
    with pytest.raises(ToolError, match="thread_not_found") as no_thread:
        await call("read_thread", channel=GENERAL, thread_ts="1.000000")

    assert replied.data["thread_ts"] == parent
    assert [(m["user_name"], m["text"]) for m in thread.data["messages"]] == [
        ("Ada Lovelace", "Release on Friday?"),
        ("Bobby", "Yes, after the freeze"),
        ("U0000BOT", "Works for me"),
    ]
    assert thread.message.splitlines()[0].endswith(
        f"Ada Lovelace: Release on Friday? [thread {parent}: 2 replies]"
    )
    assert channel.data["messages"][0]["text"] == "Works for me"
    assert (no_thread.value.code, no_thread.value.recoverable) == ("not_found", False)


async def test_what_is_read_names_people_asking_slack_once_per_person(slack: SlackServer):
    slack.add_message(GENERAL, "U0000ADA", "Thanks <@U0000BOB>, and <@U0000ZED|zed>")
    slack.add_message(GENERAL, "U0000ZED", "Who am I?")

    first = await call("read", channel=GENERAL)
    again = await call("read", channel=GENERAL)

    assert first.message.splitlines()[:3] == [
        f"{first.data['messages'][0]['time']} U0000ZED: Who am I?",
        f"{first.data['messages'][1]['time']} Ada Lovelace: Thanks @Bobby, and @U0000ZED",
        f"{first.data['messages'][2]['time']} Bobby: Coffee first",
    ]
    assert [m["user"] for m in again.data["messages"]][:3] == ["U0000ZED", "U0000ADA", "U0000BOB"]
    assert again.data["messages"][2]["user_name"] == "Bobby"
    asked = sorted(args["user"] for method, args in slack.calls if method == "users.info")
    assert asked == ["U0000ADA", "U0000BOB", "U0000ZED"], "each person asked about once"


async def test_without_users_read_the_ids_stay_and_reading_works(slack: SlackServer):
    slack.users_readable = False

    first = await call("read", channel=GENERAL)
    again = await call("read", channel=GENERAL)

    assert [m["user_name"] for m in again.data["messages"]] == ["U0000BOB", "U0000ADA"]
    assert first.message.splitlines()[0].endswith("U0000BOB: Coffee first")
    asked = [args["user"] for method, args in slack.calls if method == "users.info"]
    assert sorted(asked) == ["U0000ADA", "U0000BOB"], "Slack's refusal is remembered too"


async def test_channel_history_comes_a_page_at_a_time(slack: SlackServer):
    for number in range(3):
        slack.add_message(GENERAL, "U0000ADA", f"note {number}")

    first = await call("read", channel=GENERAL, limit=2)
    second = await call("read", channel=GENERAL, limit=2, cursor=first.data["next_cursor"])
    last = await call("read", channel=GENERAL, limit=2, cursor=second.data["next_cursor"])

    assert [m["text"] for m in first.data["messages"]] == ["note 2", "note 1"]
    assert first.message.splitlines()[-1] == (
        f"More: continue with cursor {first.data['next_cursor']}"
    )
    assert [m["text"] for m in second.data["messages"]] == ["note 0", "Coffee first"]
    assert [m["text"] for m in last.data["messages"]] == ["Standup at ten"]
    assert (first.data["has_more"], last.data["has_more"], last.data["next_cursor"]) == (
        True,
        False,
        None,
    )


async def test_channels_are_listed_a_page_at_a_time(slack: SlackServer):
    slack.channels["C000000DEVS"] = Channel("C000000DEVS", "devs")

    first = await call("channels", limit=2)
    rest = await call("channels", limit=2, cursor=first.data["next_cursor"])

    assert [c["name"] for c in first.data["channels"]] == ["general", "random"]
    assert first.message.splitlines() == [
        "#general (C0000GENERAL)",
        "#random (C00000RANDOM), the bot is not in it",
        f"More: continue with cursor {first.data['next_cursor']}",
    ]
    assert [c["id"] for c in rest.data["channels"]] == ["C000000DEVS"]
    assert (rest.data["has_more"], rest.data["next_cursor"]) == (False, None)
