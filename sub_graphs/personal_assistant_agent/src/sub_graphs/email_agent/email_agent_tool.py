"""Sends real email over SMTP (STARTTLS, implicit TLS, or plain for a local relay), and reads
the user's mail over IMAP, read-only."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr

from pydantic import BaseModel, Field, field_validator

from orchestrator.tools import Tool, ToolError, ToolRequest, ToolResult, action

from .attachments import Attachment, read_attachments
from .email_settings import EmailSettings
from .imap_reading import Fetched, fetch, mailbox_open, search_uids
from .message_text import summary, summary_line, whole
from .reading_params import ListMessages, ReadMessage, SearchMessages, one_line, search_criteria
from .resend_delivery import deliver_resend
from .smtp_delivery import deliver, refused_error


def _address(value: str) -> str:
    _, address = parseaddr(value)
    local, _, domain = address.rpartition("@")
    if not local or "." not in domain or address != value.strip():
        raise ValueError(f"{value!r} is not an email address")
    return address


class SendEmail(BaseModel):
    to: list[str] = Field(min_length=1, description="Recipient addresses.")
    subject: str = Field(min_length=1, max_length=300)
    body: str = Field(description="Plain-text body.")
    html: str | None = Field(
        default=None, description="An HTML version of the body, sent beside the plain text."
    )
    cc: list[str] = Field(default_factory=list, description="Copy recipients.")
    bcc: list[str] = Field(
        default_factory=list, description="Blind-copy recipients: no other recipient sees them."
    )
    reply_to: list[str] = Field(
        default_factory=list, description="Where replies should go, when not to the sender."
    )
    attachments: list[str] = Field(
        default_factory=list, description="Files to attach, by path inside the attachments folder."
    )

    _subject = field_validator("subject")(one_line)

    @field_validator("to", "cc", "bcc", "reply_to")
    @classmethod
    def _addresses(cls, values: list[str]) -> list[str]:
        return [_address(v) for v in values]


class EmailAgent(Tool):
    """Sends email through the configured SMTP server; reads mail over IMAP, read-only."""

    settings_model = EmailSettings

    @action(ListMessages)
    async def list_messages(self, params: ListMessages, request: ToolRequest) -> ToolResult:
        """List the newest messages of a mailbox (read-only: nothing is marked read)."""
        criteria: list[str | bytes] = ["UNSEEN"] if params.unread_only else []
        return await self._listing(params, criteria, request)

    @action(SearchMessages)
    async def search(self, params: SearchMessages, request: ToolRequest) -> ToolResult:
        """Search a mailbox by sender, recipient, subject, text and dates, newest first (read-only)."""
        return await self._listing(params, search_criteria(params), request)

    @action(ReadMessage)
    async def read(self, params: ReadMessage, request: ToolRequest) -> ToolResult:
        """Read one message: its headers, text and the names of its attachments (read-only)."""
        settings = self.settings(EmailSettings)
        found = await asyncio.to_thread(_read, settings, params.mailbox, params.uid)
        if found is None:
            raise ToolError(
                f"There is no message #{params.uid} in {params.mailbox}; list_messages shows their numbers",
                code="not_found",
                recoverable=False,
            )
        text, data = whole(found, max_chars=params.max_chars)
        return request.result(text, data=data | {"mailbox": params.mailbox})

    async def _listing(
        self, params: ListMessages, criteria: list[str | bytes], request: ToolRequest
    ) -> ToolResult:
        settings = self.settings(EmailSettings)
        total, found = await asyncio.to_thread(
            _newest, settings, params.mailbox, criteria, params.limit
        )
        if not found:
            return request.result(
                f"No messages in {params.mailbox} match."
                if criteria
                else f"{params.mailbox} is empty.",
                data={"mailbox": params.mailbox, "total": 0, "messages": []},
            )
        lines = "\n".join(summary_line(f) for f in found)
        return request.result(
            f"{len(found)} of {total} in {params.mailbox}, newest first:\n{lines}",
            data={
                "mailbox": params.mailbox,
                "total": total,
                "messages": [summary(f) for f in found],
            },
        )

    @action(SendEmail, sensitive=True)
    async def send(self, params: SendEmail, request: ToolRequest) -> ToolResult:
        """Send a plain-text email. An HTML version goes beside the text when given; files
        attach from the allowed folder."""
        smtp = self.settings(EmailSettings)
        attachments = read_attachments(smtp, params.attachments)
        message = _compose(smtp, params, attachments)
        if smtp.provider == "resend":
            sent_id = await deliver_resend(smtp, message, bcc=params.bcc, attachments=attachments)
        else:
            recipients = list(dict.fromkeys(params.to + params.cc + params.bcc))
            refusals = await asyncio.to_thread(deliver, smtp, message, recipients)
            if refusals:
                raise refused_error(refusals, sent_to=[r for r in recipients if r not in refusals])
            sent_id = None
        hidden = f" (bcc: {', '.join(params.bcc)})" if params.bcc else ""
        through = " through Resend" if smtp.provider == "resend" else ""
        return request.result(
            f"Email sent to {', '.join(params.to + params.cc)}{hidden}{through}.",
            data={
                "message_id": message["Message-ID"],
                **({"provider_id": sent_id} if sent_id is not None else {}),
                "to": params.to,
                "cc": params.cc,
                "bcc": params.bcc,
                "subject": params.subject,
                "attachments": [a.filename for a in attachments],
            },
        )


def _compose(smtp: EmailSettings, params: SendEmail, attachments: list[Attachment]) -> EmailMessage:
    message = EmailMessage()
    message["From"] = smtp.from_address
    message["To"] = ", ".join(params.to)
    if params.cc:
        message["Cc"] = ", ".join(params.cc)
    if params.reply_to:
        message["Reply-To"] = ", ".join(params.reply_to)
    message["Subject"] = params.subject
    message["Message-ID"] = make_msgid(domain=smtp.from_address.rpartition("@")[2])
    message.set_content(params.body)
    if params.html is not None:
        message.add_alternative(params.html, subtype="html")
    for attachment in attachments:
        message.add_attachment(
            attachment.content,
            maintype=attachment.maintype,
            subtype=attachment.subtype,
            filename=attachment.filename,
        )
    return message


def _newest(
    settings: EmailSettings, mailbox: str, criteria: list[str | bytes], limit: int
) -> tuple[int, list[Fetched]]:
    with mailbox_open(settings, mailbox) as client:
        uids = search_uids(client, criteria)
        newest = fetch(client, uids[-limit:], headers_only=True)
    return len(uids), sorted(newest, key=lambda f: f.uid, reverse=True)


def _read(settings: EmailSettings, mailbox: str, uid: int) -> Fetched | None:
    with mailbox_open(settings, mailbox) as client:
        return next(iter(fetch(client, [uid], headers_only=False)), None)
