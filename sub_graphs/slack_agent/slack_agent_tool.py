"""Slack: post a message to a channel, read a channel's recent messages (slack_sdk)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .slack_access import SlackSettings, channel_id, client_for, failures

CHANNEL = "The channel: #name or its id (C0123...); the configured one when left out."


class Post(BaseModel):
    text: str = Field(min_length=1, max_length=40_000, description="The message (Slack mrkdwn).")
    channel: str | None = Field(default=None, description=CHANNEL)
    thread_ts: str | None = Field(
        default=None, description="Reply in this thread: the ts of its first message."
    )


class Read(BaseModel):
    channel: str | None = Field(default=None, description=CHANNEL)
    limit: int = Field(default=20, ge=1, le=200, description="How many recent messages.")


class SlackAgent(Tool):
    """Posts to and reads Slack channels through the Web API."""

    settings_model = SlackSettings

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
        """Read a Slack channel's most recent messages, newest first."""
        settings = self._settings()
        client = client_for(settings)
        with failures(channel=params.channel or settings.channel):
            where = channel_id(client, params.channel, default=settings.channel)
            history = client.conversations_history(channel=where, limit=params.limit)
        messages = [_message(item) for item in history.get("messages", [])][: params.limit]
        lines = [f"{m['time']} {m['user']}: {m['text']}" for m in messages] or ["No messages."]
        return request.result(
            "\n".join(lines),
            data={
                "channel": where,
                "messages": messages,
                "has_more": bool(history.get("has_more")),
            },
            metadata={"provider": "slack"},
        )

    def _settings(self) -> SlackSettings:
        return self.settings(SlackSettings)


def _message(item: dict[str, object]) -> dict[str, object]:
    ts = str(item.get("ts", ""))
    try:
        when = datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        when = ts
    return {
        "ts": ts,
        "time": when,
        "user": item.get("user") or item.get("username") or item.get("bot_id") or "unknown",
        "text": item.get("text", ""),
        "thread_ts": item.get("thread_ts"),
        "reply_count": item.get("reply_count", 0),
    }
