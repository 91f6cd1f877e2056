"""Slack: post to a channel or a thread; read a channel, a thread, the channels (slack_sdk)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from pydantic import BaseModel, Field, PrivateAttr
from slack_sdk import WebClient
from slack_sdk.web import SlackResponse

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .slack_access import SlackSettings, channel_id, client_for, failures
from .slack_users import UserNames

CHANNEL = "The channel: #name or its id (C0123...); the configured one when left out."
CURSOR = "Continue from the last page: the next_cursor it gave."


class Post(BaseModel):
    text: str = Field(min_length=1, max_length=40_000, description="The message (Slack mrkdwn).")
    channel: str | None = Field(default=None, description=CHANNEL)
    thread_ts: str | None = Field(
        default=None, description="Reply in this thread: the ts of its first message."
    )


class Read(BaseModel):
    channel: str | None = Field(default=None, description=CHANNEL)
    limit: int = Field(default=20, ge=1, le=200, description="How many messages.")
    cursor: str | None = Field(default=None, description="Older messages: " + CURSOR)


class ReadThread(BaseModel):
    thread_ts: str = Field(min_length=1, description="The ts of the thread's first message.")
    channel: str | None = Field(default=None, description=CHANNEL)
    limit: int = Field(default=50, ge=1, le=200, description="How many messages.")
    cursor: str | None = Field(default=None, description="Later replies: " + CURSOR)


class Channels(BaseModel):
    limit: int = Field(default=100, ge=1, le=1000, description="How many channels.")
    cursor: str | None = Field(default=None, description=CURSOR)


class SlackAgent(Tool):
    """Posts to Slack channels and threads; reads channels, threads and the channel list."""

    settings_model = SlackSettings

    # Names of user ids, kept across calls: a name is asked of Slack once.
    _names: UserNames = PrivateAttr(default_factory=UserNames)

    @action(Post, sensitive=True)
    def post(self, params: Post, request: ToolRequest) -> ToolResult:
        """Post a message to a Slack channel (or reply in a thread)."""
        settings = self._settings()
        client = client_for(settings)
        with failures(channel=params.channel or settings.channel):
            where = channel_id(client, params.channel, default=settings.channel)
            sent = client.chat_postMessage(
                channel=where, text=params.text, thread_ts=params.thread_ts
            )
        return request.result(
            f"Posted to {params.channel or settings.channel} (ts {sent['ts']}).",
            data={
                "channel": sent["channel"],
                "ts": sent["ts"],
                "text": params.text,
                "thread_ts": params.thread_ts,
            },
            metadata={"provider": "slack"},
        )

    @action(Read)
    def read(self, params: Read, request: ToolRequest) -> ToolResult:
        """Read a Slack channel's messages, newest first, a page at a time."""
        settings = self._settings()
        client = client_for(settings)
        with failures(channel=params.channel or settings.channel):
            where = channel_id(client, params.channel, default=settings.channel)
            page = client.conversations_history(
                channel=where, limit=params.limit, cursor=params.cursor
            )
            messages = self._messages(client, settings, page.get("messages", []), params.limit)
        return _page(request, where, messages, _next_cursor(page))

    @action(ReadThread)
    def read_thread(self, params: ReadThread, request: ToolRequest) -> ToolResult:
        """Read a thread: its first message, then the replies, oldest first."""
        settings = self._settings()
        client = client_for(settings)
        with failures(channel=params.channel or settings.channel):
            where = channel_id(client, params.channel, default=settings.channel)
            page = client.conversations_replies(
                channel=where, ts=params.thread_ts, limit=params.limit, cursor=params.cursor
            )
            messages = self._messages(client, settings, page.get("messages", []), params.limit)
        return _page(request, where, messages, _next_cursor(page))

    @action(Channels)
    def channels(self, params: Channels, request: ToolRequest) -> ToolResult:
        """List the workspace's channels the bot can see, a page at a time."""
        client = client_for(self._settings())
        with failures():
            page = client.conversations_list(
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=params.limit,
                cursor=params.cursor,
            )
        found = [
            {
                "id": str(item.get("id", "")),
                "name": str(item.get("name", "")),
                "is_private": bool(item.get("is_private")),
                "is_member": bool(item.get("is_member")),
                "members": item.get("num_members"),
                "topic": str((item.get("topic") or {}).get("value", "")),
            }
            for item in page.get("channels", [])
        ]
        next_cursor = _next_cursor(page)
        lines = [
            f"#{c['name']} ({c['id']}){'' if c['is_member'] else ', the bot is not in it'}"
            for c in found
        ] or ["No channels."]
        if next_cursor:
            lines.append(f"More: continue with cursor {next_cursor}")
        return request.result(
            "\n".join(lines),
            data={"channels": found, "next_cursor": next_cursor, "has_more": bool(next_cursor)},
            metadata={"provider": "slack"},
        )

    def _messages(
        self, client: WebClient, settings: SlackSettings, items: list[dict[str, object]], limit: int
    ) -> list[dict[str, object]]:
        workspace = _workspace(settings)
        messages: list[dict[str, object]] = []
        for item in items[:limit]:
            message = _message(item)
            user = item.get("user")  # a person; a bot's post has its username or bot_id
            if isinstance(user, str) and user:
                message["user_name"] = self._names.name(client, workspace, user)
            message["text"] = self._names.in_text(client, workspace, str(message["text"]))
            messages.append(message)
        return messages

    def _settings(self) -> SlackSettings:
        return self.settings(SlackSettings)


def _page(
    request: ToolRequest,
    channel: str,
    messages: list[dict[str, object]],
    next_cursor: str | None,
) -> ToolResult:
    lines = [_line(m) for m in messages] or ["No messages."]
    if next_cursor:
        lines.append(f"More: continue with cursor {next_cursor}")
    return request.result(
        "\n".join(lines),
        data={
            "channel": channel,
            "messages": messages,
            "has_more": next_cursor is not None,
            "next_cursor": next_cursor,
        },
        metadata={"provider": "slack"},
    )


def _workspace(settings: SlackSettings) -> str:
    """A key of the server and token, the token's value unseen."""
    text = f"{settings.base_url}\0{settings.token.get_secret_value()}"
    return hashlib.sha256(text.encode()).hexdigest()


def _next_cursor(page: SlackResponse) -> str | None:
    cursor = (page.get("response_metadata") or {}).get("next_cursor")
    return str(cursor) if cursor else None


def _line(message: dict[str, object]) -> str:
    line = f"{message['time']} {message['user_name']}: {message['text']}"
    replies = message.get("reply_count") or 0
    if replies and message.get("thread_ts") == message.get("ts"):
        line += f" [thread {message['ts']}: {replies} repl{'ies' if replies != 1 else 'y'}]"
    return line


def _message(item: dict[str, object]) -> dict[str, object]:
    ts = str(item.get("ts", ""))
    try:
        when = datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        when = ts
    author = item.get("user") or item.get("username") or item.get("bot_id") or "unknown"
    return {
        "ts": ts,
        "time": when,
        "user": author,
        "user_name": author,
        "text": item.get("text", ""),
        "thread_ts": item.get("thread_ts"),
        "reply_count": item.get("reply_count", 0),
    }
