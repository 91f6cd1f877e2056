"""What a message says, as text for the model and as data: its headers, body and attachments."""

from __future__ import annotations

from email.message import EmailMessage
from html.parser import HTMLParser

from pydantic import JsonValue

from .imap_reading import Fetched

_BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre"}


def summary_line(fetched: Fetched) -> str:
    """`#101 2026-11-30T12:00+00:00 Bob <bob@example.com>: Lunch (unread)`."""
    message = fetched.message
    sender = _header(message, "From") or "(no sender)"
    subject = _header(message, "Subject") or "(no subject)"
    unread = "" if fetched.seen else " (unread)"
    return f"#{fetched.uid} {_date(message) or '(no date)'} {sender}: {subject}{unread}"


def summary(fetched: Fetched) -> dict[str, JsonValue]:
    """The message's headers as data."""
    message = fetched.message
    return {
        "uid": fetched.uid,
        "from": _header(message, "From"),
        "to": _header(message, "To"),
        "subject": _header(message, "Subject"),
        "date": _date(message),
        "seen": fetched.seen,
    }


def whole(fetched: Fetched, *, max_chars: int) -> tuple[str, dict[str, JsonValue]]:
    """The message as text (headers, attachments, body cut at `max_chars`) and as data."""
    message = fetched.message
    body = body_text(message)
    truncated = len(body) > max_chars
    files = [
        (part.get_filename() or "(unnamed)", part.get_content_type(), _size(part))
        for part in message.iter_attachments()
    ]
    attachments: list[JsonValue] = [
        {"filename": n, "content_type": t, "bytes": b} for n, t, b in files
    ]
    data = summary(fetched) | {
        "cc": _header(message, "Cc"),
        "message_id": _header(message, "Message-ID"),
        "body": body[:max_chars],
        "truncated": truncated,
        "attachments": attachments,
    }
    headers = [
        f"{name}: {message[name]}"
        for name in ("From", "To", "Cc", "Date", "Subject")
        if message[name]
    ]
    if files:
        headers.append("Attachments: " + ", ".join(f"{n} ({t}, {b:,} bytes)" for n, t, b in files))
    cut = f"\n[cut at {max_chars:,} of {len(body):,} characters]" if truncated else ""
    return "\n".join(headers) + "\n\n" + body[:max_chars] + cut, data


def body_text(message: EmailMessage) -> str:
    """The plain-text body; the HTML one as text when there is no plain one."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except LookupError:  # a charset Python does not know: its bytes as UTF-8, mistakes replaced
        content = part.get_payload(decode=True)
    text = content if isinstance(content, str) else bytes(content or b"").decode(errors="replace")
    if part.get_content_type() == "text/html":
        text = _html_text(text)
    return text.replace("\r\n", "\n").strip()


def _size(part: EmailMessage) -> int:
    payload = part.get_payload(decode=True)
    return len(payload) if isinstance(payload, bytes) else 0


def _header(message: EmailMessage, name: str) -> str | None:
    value = message[name]
    return None if value is None else str(value)


def _date(message: EmailMessage) -> str | None:
    moment = getattr(message["Date"], "datetime", None)  # None when it is no date
    return moment.isoformat(timespec="minutes") if moment is not None else _header(message, "Date")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._hidden += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden = max(0, self._hidden - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)
