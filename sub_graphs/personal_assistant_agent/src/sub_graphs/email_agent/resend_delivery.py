"""Sends through Resend's HTTP API (POST /emails) instead of SMTP, in the same error codes.

Resend answers each failure with `{"statusCode", "name", "message"}`
(https://resend.com/docs/api-reference/errors): a key it does not know is
`bad_credentials`, a message it will not send (a domain not verified, a bad field) is
`refused`, a sender it will not take `not_configured`, its rate limit `rate_limited`
(retryable), a quota spent `quota_exceeded`, its own failure `server_error` (retryable).
"""

from __future__ import annotations

import base64
from email.message import EmailMessage

import httpx

from orchestrator.tools import ToolError

from .attachments import Attachment
from .email_settings import EmailSettings

BAD_KEY = {"missing_api_key", "invalid_api_key", "restricted_api_key"}
QUOTA = {"daily_quota_exceeded", "monthly_quota_exceeded"}


async def deliver_resend(
    settings: EmailSettings,
    message: EmailMessage,
    *,
    bcc: list[str],
    attachments: list[Attachment],
) -> str:
    """Send `message` (its headers and text and HTML parts) through Resend; Resend's id of it."""
    key = settings.resend_api_key
    if key is None:
        raise ToolError(
            "Sending through Resend needs its API key: "
            f"{settings.how_to_set_these('resend_api_key')}",
            code="not_configured",
            recoverable=False,
        )
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"}
    url = f"{settings.resend_base_url.rstrip('/')}/emails"
    try:
        async with httpx.AsyncClient(timeout=settings.timeout_seconds) as client:
            answer = await client.post(url, json=_body(message, bcc, attachments), headers=headers)
    except httpx.TransportError as error:
        raise ToolError(
            f"Could not reach Resend at {settings.resend_base_url}: {error or type(error).__name__}",
            code="server_unreachable",
            recoverable=True,
        ) from None
    if answer.is_success:
        return str(answer.json().get("id", ""))
    raise _failure(answer, settings)


def _body(message: EmailMessage, bcc: list[str], attachments: list[Attachment]) -> dict[str, object]:
    body: dict[str, object] = {
        "from": message["From"],
        "to": _list(message["To"]),
        "subject": message["Subject"],
        "text": _part(message, "plain"),
    }
    optional = {
        "cc": _list(message["Cc"]),
        "bcc": bcc,
        "reply_to": _list(message["Reply-To"]),
        "html": _part(message, "html"),
        "attachments": [
            {
                "filename": a.filename,
                "content": base64.b64encode(a.content).decode("ascii"),
                "content_type": f"{a.maintype}/{a.subtype}",
            }
            for a in attachments
        ],
    }
    return body | {name: value for name, value in optional.items() if value}


def _list(header: str | None) -> list[str]:
    return [address.strip() for address in str(header).split(",")] if header else []


def _part(message: EmailMessage, subtype: str) -> str | None:
    part = message.get_body(preferencelist=(subtype,))
    return part.get_content() if part is not None and part.get_content_subtype() == subtype else None


def _failure(answer: httpx.Response, settings: EmailSettings) -> ToolError:
    try:
        said = answer.json()
    except ValueError:
        said = {}
    name = str(said.get("name", "")) if isinstance(said, dict) else ""
    text = str(said.get("message", "")) if isinstance(said, dict) else ""
    text = text or answer.reason_phrase
    where = f"Resend refused the email ({answer.status_code} {name or 'error'}): {text}"
    if name in BAD_KEY or answer.status_code == 401:
        how = settings.how_to_set_these("resend_api_key")
        return ToolError(f"{where}. Check the key: {how}", code="bad_credentials", recoverable=False)
    if name == "invalid_from_address":
        how = settings.how_to_set_these("from_address")
        return ToolError(f"{where}. {how}", code="not_configured", recoverable=False)
    if name in QUOTA:
        return ToolError(where, code="quota_exceeded", recoverable=False)
    if answer.status_code == 429:
        return ToolError(where, code="rate_limited", recoverable=True)
    if answer.status_code >= 500:
        return ToolError(where, code="server_error", recoverable=True)
    return ToolError(where, code="refused", recoverable=False)
