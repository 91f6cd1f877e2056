"""Sends real email over SMTP (STARTTLS, implicit TLS, or plain for a local relay)."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from orchestrator.tools import Tool, ToolError, ToolRequest, ToolResult, ToolSettings, action


class SmtpSettings(ToolSettings):
    """The SMTP server: `config` of tool_config.yaml, overridden by EMAIL_AGENT_* variables."""

    model_config = SettingsConfigDict(env_prefix="EMAIL_AGENT_")

    smtp_host: str = "localhost"
    smtp_port: int = Field(default=587, ge=1, le=65535)
    security: Literal["starttls", "ssl", "none"] = "starttls"
    from_address: str
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    timeout_seconds: float = Field(default=30, gt=0)


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
    cc: list[str] = Field(default_factory=list, description="Copy recipients.")

    @field_validator("to", "cc")
    @classmethod
    def _addresses(cls, values: list[str]) -> list[str]:
        return [_address(v) for v in values]


class EmailAgent(Tool):
    """Sends email through the configured SMTP server."""

    settings_model = SmtpSettings

    @action(SendEmail)
    async def send(self, params: SendEmail, request: ToolRequest) -> ToolResult:
        """Send a plain-text email."""
        smtp = self.settings(SmtpSettings)
        message = EmailMessage()
        message["From"] = smtp.from_address
        message["To"] = ", ".join(params.to)
        if params.cc:
            message["Cc"] = ", ".join(params.cc)
        message["Subject"] = params.subject
        message["Message-ID"] = make_msgid(domain=smtp.from_address.rpartition("@")[2])
        message.set_content(params.body)
        try:
            await asyncio.to_thread(_deliver, smtp, message)
        except (smtplib.SMTPException, OSError) as error:
            raise ToolError(
                f"Could not send the email through {smtp.smtp_host}:{smtp.smtp_port}: {error}",
                code="smtp_error",
            ) from None
        return request.result(
            f"Email sent to {', '.join(params.to + params.cc)}.",
            data={"message_id": message["Message-ID"], "to": params.to, "subject": params.subject},
        )


def _deliver(smtp: SmtpSettings, message: EmailMessage) -> None:
    context = ssl.create_default_context()
    where = (smtp.smtp_host, smtp.smtp_port)
    if smtp.security == "ssl":
        connected = smtplib.SMTP_SSL(*where, timeout=smtp.timeout_seconds, context=context)
    else:
        connected = smtplib.SMTP(*where, timeout=smtp.timeout_seconds)
    with connected as client:
        if smtp.security == "starttls":
            client.starttls(context=context)
        if smtp.smtp_username and smtp.smtp_password:
            client.login(smtp.smtp_username, smtp.smtp_password.get_secret_value())
        client.send_message(message)
