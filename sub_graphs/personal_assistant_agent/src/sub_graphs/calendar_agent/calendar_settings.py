"""The calendar agent's settings: `config` of tool_config.yaml, overridden by CALENDAR_AGENT_*
variables; which provider keeps the events (CalDAV or Google Calendar), and the one zone."""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import tzlocal
from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import SettingsConfigDict

from orchestrator.errors import ToolError
from orchestrator.tools import ToolSettings

Provider = Literal["caldav", "google"]


def _env_only(name: str) -> str:
    # A validation alias alone: `config:` in tool_config.yaml (shared with the folder) cannot set it.
    return f"CALENDAR_AGENT_{name}"


class CalendarSettings(ToolSettings):
    """The account: a CalDAV server (`url` and its login), or Google Calendar (an OAuth2 access
    token, or a refresh token and the OAuth client to get one), and the zone of every time."""

    model_config = SettingsConfigDict(env_prefix="CALENDAR_AGENT_")

    provider: Provider = "caldav"
    url: str | None = Field(default=None, validate_default=True)
    username: str | None = None
    password: SecretStr | None = None

    google_access_token: SecretStr | None = Field(
        default=None, validation_alias=_env_only("GOOGLE_ACCESS_TOKEN")
    )
    google_refresh_token: SecretStr | None = Field(
        default=None, validation_alias=_env_only("GOOGLE_REFRESH_TOKEN")
    )
    google_client_id: SecretStr | None = Field(
        default=None, validation_alias=_env_only("GOOGLE_CLIENT_ID")
    )
    google_client_secret: SecretStr | None = Field(
        default=None, validation_alias=_env_only("GOOGLE_CLIENT_SECRET")
    )
    google_base_url: str = "https://www.googleapis.com/calendar/v3"
    google_token_url: str = "https://oauth2.googleapis.com/token"

    calendar: str | None = None
    timezone: str | None = None
    timeout_seconds: int = Field(default=30, ge=1)

    @field_validator("url")
    @classmethod
    def _caldav_needs_a_url(cls, url: str | None, info: ValidationInfo) -> str | None:
        if url is None and info.data.get("provider", "caldav") == "caldav":
            raise PydanticCustomError("missing", "Field required")
        return url

    def zone(self) -> ZoneInfo:
        """The zone every event is listed in, and of times given without one: the setting, else
        the machine's own zone (UTC when the machine names none)."""
        name = self.timezone
        try:
            # tzlocal raises the same errors when the machine's settings disagree or name no zone
            name = name or tzlocal.get_localzone_name() or "UTC"
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            what = repr(name) if name else "the machine's zone"
            raise ToolError(
                f"calendar_agent's timezone {what} is not an IANA zone (e.g. Europe/Paris): "
                "set CALENDAR_AGENT_TIMEZONE",
                code="not_configured",
                recoverable=False,
            ) from None
