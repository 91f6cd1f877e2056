"""The Slack Web API client the settings describe, channels by name, errors said for the model."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.error import URLError

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from orchestrator.errors import InvalidToolArgumentsError, ToolError, TransientToolError
from orchestrator.tools import ToolSettings

CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")
BAD_CREDENTIALS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
NOT_FOUND = frozenset({"channel_not_found", "thread_not_found", "message_not_found"})
REFUSED = frozenset(
    {
        "not_in_channel",
        "is_archived",
        "restricted_action",
        "missing_scope",
        "no_permission",
        "ekm_access_denied",
        "team_access_not_granted",
        "access_denied",
    }
)
BUSY = frozenset({"ratelimited", "service_unavailable", "fatal_error", "internal_error"})
# conversations.list pages read while looking for a channel by name.
MAX_PAGES = 20


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING


# slack_sdk logs each failed request as an ERROR of its own before raising; the raised error
# comes back as the tool's one error, so its lines would say it twice, raw. Its debug lines stay.
SDK_LOG = logging.getLogger("slack_sdk.slack_agent")
SDK_LOG.addFilter(_BelowWarning())


class SlackSettings(ToolSettings):
    """The workspace: `config` of tool_config.yaml, overridden by SLACK_AGENT_* variables."""

    model_config = SettingsConfigDict(env_prefix="SLACK_AGENT_")

    token: SecretStr
    base_url: str = "https://slack.com/api/"
    channel: str | None = None
    timeout_seconds: int = Field(default=30, ge=1)


def client_for(settings: SlackSettings) -> WebClient:
    """slack_sdk's WebClient for the configured token and server."""
    base = settings.base_url if settings.base_url.endswith("/") else settings.base_url + "/"
    return WebClient(
        token=settings.token.get_secret_value(),
        base_url=base,
        timeout=settings.timeout_seconds,
        logger=SDK_LOG,
    )


def channel_id(client: WebClient, channel: str | None, *, default: str | None) -> str:
    """The id of `channel` (an id, `#name` or `name`), else of the configured channel."""
    chosen = (channel or default or "").strip()
    if not chosen:
        raise InvalidToolArgumentsError(
            "Which channel? Name it (#name or its id); slack_agent has no default channel "
            "(SLACK_AGENT_CHANNEL)"
        )
    if CHANNEL_ID.match(chosen):
        return chosen
    name = chosen.lstrip("#").lower()
    cursor = None
    for _ in range(MAX_PAGES):
        page = client.conversations_list(
            types="public_channel,private_channel", exclude_archived=True, limit=200, cursor=cursor
        )
        for found in page.get("channels", []):
            if str(found.get("name", "")).lower() == name:
                return str(found["id"])
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    raise ToolError(
        f"There is no channel #{name} that the bot can see (invite it to the channel, or check "
        "the name)",
        code="not_found",
        recoverable=False,
    )


@contextmanager
def failures(*, channel: str | None = None) -> Iterator[None]:
    """Slack's errors as ToolErrors: bad token, not found, refused, unreachable."""
    where = f"channel {channel}" if channel else "Slack"
    try:
        yield
    except SlackApiError as error:
        raise _api_error(str(error.response.get("error", "")), where=where) from None
    except (URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ToolError(f"Could not reach Slack: {reason}", code="server_unreachable") from None
    except SlackClientError as error:
        raise ToolError(f"Slack call failed: {error}", code="slack_error") from None


def _api_error(code: str, *, where: str) -> ToolError:
    if code in BAD_CREDENTIALS:
        return ToolError(
            f"Slack refused the token: {code} (check SLACK_AGENT_TOKEN)",
            code="bad_credentials",
            recoverable=False,
        )
    if code in NOT_FOUND:
        return ToolError(f"Slack: {where}: {code}", code="not_found", recoverable=False)
    if code in REFUSED:
        return ToolError(f"Slack refused it: {where}: {code}", code="refused", recoverable=False)
    if code in BUSY:
        return TransientToolError(f"Slack is busy: {code}")
    return ToolError(f"Slack answered {code} ({where})", code="slack_error")
