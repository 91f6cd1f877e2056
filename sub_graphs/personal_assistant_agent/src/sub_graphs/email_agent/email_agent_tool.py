"""Sends real email over SMTP (STARTTLS, implicit TLS, or plain for a local relay)."""

from __future__ import annotations

import asyncio
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr

from pydantic import BaseModel, Field, field_validator

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .attachments import Attachment, read_attachments
from .smtp_delivery import SmtpSettings, deliver, refused_error


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

    @field_validator("to", "cc", "bcc", "reply_to")
    @classmethod
    def _addresses(cls, values: list[str]) -> list[str]:
        return [_address(v) for v in values]


class EmailAgent(Tool):
    """Sends email through the configured SMTP server."""

    settings_model = SmtpSettings

    @action(SendEmail)
    async def send(self, params: SendEmail, request: ToolRequest) -> ToolResult:
        """Send a plain-text email. With html, an HTML version goes beside the text; files attach from the allowed folder."""
        smtp = self.settings(SmtpSettings)
        attachments = read_attachments(smtp, params.attachments)
        message = _compose(smtp, params, attachments)
        recipients = list(dict.fromkeys(params.to + params.cc + params.bcc))
        refusals = await asyncio.to_thread(deliver, smtp, message, recipients)
        if refusals:
            raise refused_error(refusals, sent_to=[r for r in recipients if r not in refusals])
        hidden = f" (bcc: {', '.join(params.bcc)})" if params.bcc else ""
        return request.result(
            f"Email sent to {', '.join(params.to + params.cc)}{hidden}.",
            data={
                "message_id": message["Message-ID"],
                "to": params.to,
                "cc": params.cc,
                "bcc": params.bcc,
                "subject": params.subject,
                "attachments": [a.filename for a in attachments],
            },
        )


def _compose(smtp: SmtpSettings, params: SendEmail, attachments: list[Attachment]) -> EmailMessage:
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
