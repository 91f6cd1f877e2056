"""A server on 127.0.0.1 speaking Slack's Web API JSON: channels, posts, history, threads,
users, cursor pages and its errors."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from tests.server_thread import ServedOnThread, send_json

TOKEN = "xoxb-test-token"


@dataclass
class Channel:
    id: str
    name: str
    messages: list[dict[str, object]] = field(default_factory=list)  # newest first
    member: bool = True


class SlackServer(ServedOnThread):
    """Answers chat.postMessage, conversations.history, .replies and .list, and users.info as
    Slack does, the lists a page at a time (`limit`, `cursor`, `response_metadata.next_cursor`).

    A wrong token is `invalid_auth`; an unknown channel `channel_not_found`; a channel the
    bot is not in `not_in_channel`; an unknown thread `thread_not_found`; an unknown user
    `user_not_found`. Every call is kept in `calls` (method, arguments).
    """

    def __init__(self) -> None:
        self.channels = {
            "C0000GENERAL": Channel("C0000GENERAL", "general"),
            "C00000RANDOM": Channel("C00000RANDOM", "random", member=False),
        }
        self.users: dict[str, dict[str, object]] = {
            "U0000ADA": {
                "id": "U0000ADA",
                "name": "ada",
                "real_name": "Ada Lovelace",
                "profile": {"display_name": ""},
            },
            "U0000BOB": {
                "id": "U0000BOB",
                "name": "bob",
                "real_name": "Bob Li",
                "profile": {"display_name": "Bobby"},
            },
        }
        self.users_readable = True  # False: a token without users:read (`missing_scope`)
        self.calls: list[tuple[str, dict[str, str]]] = []
        self._clock = 1_764_000_000
        self._lock = threading.Lock()
        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), self._handler()))

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/api/"

    def add_message(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> str:
        """Add a message (a reply when `thread_ts` is given); its ts."""
        with self._lock:
            self._clock += 60
            ts = f"{self._clock}.000100"
            message: dict[str, object] = {"type": "message", "user": user, "text": text, "ts": ts}
            messages = self.channels[channel].messages
            if thread_ts is not None:
                message["thread_ts"] = thread_ts
                for parent in messages:
                    if parent["ts"] == thread_ts:
                        parent["thread_ts"] = thread_ts
                        parent["reply_count"] = int(str(parent.get("reply_count", 0))) + 1
            messages.insert(0, message)
            return ts

    def answer(
        self, method: str, token: str | None, arguments: dict[str, str]
    ) -> dict[str, object]:
        self.calls.append((method, arguments))
        if token != TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        handler = {
            "chat.postMessage": self._post,
            "conversations.history": self._history,
            "conversations.list": self._list,
            "conversations.replies": self._replies,
            "users.info": self._user,
        }.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        return handler(arguments)

    def _channel(self, arguments: dict[str, str]) -> Channel | dict[str, object]:
        channel = self.channels.get(arguments.get("channel", ""))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if not channel.member:
            return {"ok": False, "error": "not_in_channel"}
        return channel

    def _post(self, arguments: dict[str, str]) -> dict[str, object]:
        channel = self._channel(arguments)
        if not isinstance(channel, Channel):
            return channel
        ts = self.add_message(
            channel.id, "U0000BOT", arguments["text"], thread_ts=arguments.get("thread_ts")
        )
        return {
            "ok": True,
            "channel": channel.id,
            "ts": ts,
            "message": {"type": "message", "user": "U0000BOT", "text": arguments["text"], "ts": ts},
        }

    def _history(self, arguments: dict[str, str]) -> dict[str, object]:
        channel = self._channel(arguments)
        if not isinstance(channel, Channel):
            return channel
        return _page(channel.messages, arguments, key="messages", default_limit=100)

    def _replies(self, arguments: dict[str, str]) -> dict[str, object]:
        channel = self._channel(arguments)
        if not isinstance(channel, Channel):
            return channel
        ts = arguments.get("ts", "")
        thread = [m for m in reversed(channel.messages) if ts in (m["ts"], m.get("thread_ts"))]
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        return _page(thread, arguments, key="messages", default_limit=1000)

    def _list(self, arguments: dict[str, str]) -> dict[str, object]:
        listed: list[dict[str, object]] = [
            {"id": c.id, "name": c.name, "is_member": c.member, "is_private": False}
            for c in self.channels.values()
        ]
        return _page(listed, arguments, key="channels", default_limit=100)

    def _user(self, arguments: dict[str, str]) -> dict[str, object]:
        if not self.users_readable:
            return {"ok": False, "error": "missing_scope", "needed": "users:read"}
        user = self.users.get(arguments.get("user", ""))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self._reply(dict(parse_qsl(urlsplit(self.path).query)))

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if "json" in (self.headers.get("Content-Type") or ""):
                    arguments = {
                        k: str(v) for k, v in json.loads(body or "{}").items() if v is not None
                    }
                else:
                    arguments = dict(parse_qsl(body))
                self._reply({**dict(parse_qsl(urlsplit(self.path).query)), **arguments})

            def _reply(self, arguments: dict[str, str]) -> None:
                method = urlsplit(self.path).path.removeprefix("/api/")
                authorization = self.headers.get("Authorization") or ""
                token = (
                    authorization.removeprefix("Bearer ")
                    if authorization
                    else arguments.pop("token", None)
                )
                send_json(self, 200, server.answer(method, token, arguments))

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def _page(
    items: list[dict[str, object]], arguments: dict[str, str], *, key: str, default_limit: int
) -> dict[str, object]:
    """Slack's cursor pages: `limit` items from the cursor on, and the cursor of the next."""
    start = int(arguments.get("cursor") or "0")
    end = start + int(arguments.get("limit") or default_limit)
    more = end < len(items)
    return {
        "ok": True,
        key: items[start:end],
        "has_more": more,
        "response_metadata": {"next_cursor": str(end) if more else ""},
    }
