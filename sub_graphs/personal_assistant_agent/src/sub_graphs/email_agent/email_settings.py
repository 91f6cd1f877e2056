"""The email agent's settings: `config` of tool_config.yaml, overridden by EMAIL_AGENT_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from orchestrator.tools import ToolSettings

Security = Literal["starttls", "ssl", "none"]
Provider = Literal["smtp", "resend"]


class EmailSettings(ToolSettings):
    """The SMTP server (or Resend) it sends through, and the IMAP server it reads from (when set)."""

    model_config = SettingsConfigDict(env_prefix="EMAIL_AGENT_")

    provider: Provider = "smtp"
    # Resend's own variable first; only from the environment or a `.env` (an alias: config:
    # in tool_config.yaml, which is shared with the folder, cannot set it).
    resend_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("RESEND_API_KEY", "EMAIL_AGENT_RESEND_API_KEY")
    )
    resend_base_url: str = "https://api.resend.com"

    smtp_host: str = "localhost"
    smtp_port: int = Field(default=587, ge=1, le=65535)
    security: Security = "starttls"
    from_address: str
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    timeout_seconds: float = Field(default=30, gt=0)
    attachments_dir: Path | None = None
    max_attachment_bytes: int = Field(default=25_000_000, gt=0)
    imap_host: str | None = None
    imap_port: int = Field(default=993, ge=1, le=65535)
    imap_security: Security = "ssl"
    imap_username: str | None = None
    imap_password: SecretStr | None = None

    @property
    def where(self) -> str:
        """host:port, as the errors name the SMTP server."""
        return f"{self.smtp_host}:{self.smtp_port}"
