"""Google Calendar's REST API v3 over httpx: an OAuth2 bearer token (refreshed from a refresh
token when one is set), the account's calendars, and Google's errors in the agent's codes.

Google answers each failure with `{"error": {"code", "message", "errors": [{"reason"}]}}`
(https://developers.google.com/calendar/api/guides/errors): 401 is `bad_credentials`, a 403
for a rate or quota limit (or a 429) `rate_limited` (retryable), any other 403 `refused`, a
404 or 410 `not_found`, a 5xx `server_error` (retryable), a 400 `invalid_arguments`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self, cast
from urllib.parse import quote

import httpx
from pydantic import JsonValue

from orchestrator.errors import InvalidToolArgumentsError, ToolError

from .calendar_settings import CalendarSettings

Json = dict[str, JsonValue]
RATE_LIMITS = {"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded"}
TOKEN_VARIABLES = ("google_access_token", "google_refresh_token")
REFRESH_FIELDS = ("google_refresh_token", "google_client_id", "google_client_secret")


class GoogleCalendar:
    """One session with Google Calendar for one action (`with GoogleCalendar(settings) as g`)."""

    def __init__(self, settings: CalendarSettings, *, uid: str | None = None) -> None:
        self._settings = settings
        self._uid = uid  # the event an action is about, for a 404's text
        self._client = httpx.Client(timeout=settings.timeout_seconds)
        token = settings.google_access_token
        self._token = token.get_secret_value() if token else None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._client.close()

    def calendar(self, name: str | None) -> tuple[str, str]:
        """The id and name of the calendar named `name` (or its id), else of the configured one,
        else the account's primary calendar."""
        wanted = name or self._settings.calendar
        calendars = self.items("/users/me/calendarList")
        for entry in calendars:
            ident, summary = str(entry.get("id")), str(entry.get("summary") or entry.get("id"))
            if wanted is None and entry.get("primary"):
                return ident, summary
            if wanted is not None and wanted.lower() in (ident.lower(), summary.lower()):
                return ident, summary
        if wanted is None:
            raise ToolError(
                "The Google account has no primary calendar", code="not_found", recoverable=False
            )
        names = ", ".join(repr(str(c.get("summary") or c.get("id"))) for c in calendars) or "none"
        raise ToolError(
            f"There is no calendar {wanted!r}; the account has: {names}",
            code="not_found",
            recoverable=False,
        )

    def items(self, path: str, params: dict[str, str] | None = None) -> list[Json]:
        """Every item of a listing, page after page (`pageToken`)."""
        found: list[Json] = []
        page: str | None = None
        while True:
            answer = self.call("GET", path, params=_page(params or {}, page))
            found += cast(list[Json], answer.get("items") or [])
            page = cast(str | None, answer.get("nextPageToken"))
            if not page:
                return found

    def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Json | None = None,
    ) -> Json:
        """One call of the API (`path` under the base URL); its JSON answer ({} when empty)."""
        answer = self._send(method, path, params=params, body=body)
        if answer.status_code == 401 and self._can_refresh():
            self._token = None  # expired: one fresh token, one more try
            answer = self._send(method, path, params=params, body=body)
        if not answer.is_success:
            raise self._failure(answer)
        return cast(Json, answer.json()) if answer.content else {}

    def _send(
        self, method: str, path: str, *, params: dict[str, str] | None, body: Json | None
    ) -> httpx.Response:
        url = f"{self._settings.google_base_url.rstrip('/')}{path}"
        headers = {"Authorization": f"Bearer {self._access_token()}"}
        try:
            return self._client.request(method, url, params=params, json=body, headers=headers)
        except httpx.TransportError as error:
            raise _unreachable(self._settings.google_base_url, error) from None

    def _can_refresh(self) -> bool:
        return all(getattr(self._settings, field) for field in REFRESH_FIELDS)

    def _access_token(self) -> str:
        if self._token is None:
            self._token = self._refreshed()
        return self._token

    def _refreshed(self) -> str:
        """A new access token from the refresh token (Google's OAuth2 token endpoint)."""
        settings = self._settings
        if not self._can_refresh():
            raise ToolError(
                "Google Calendar needs an OAuth2 access token, or a refresh token with its OAuth "
                f"client: {settings.how_to_set_these(TOKEN_VARIABLES[0])}, or "
                f"{settings.how_to_set_these(*REFRESH_FIELDS)}",
                code="not_configured",
                recoverable=False,
            )
        form = {"grant_type": "refresh_token"} | {
            field.removeprefix("google_"): _secret(settings, field) for field in REFRESH_FIELDS
        }
        try:
            answer = self._client.post(settings.google_token_url, data=form)
        except httpx.TransportError as error:
            raise _unreachable(settings.google_token_url, error) from None
        token = answer.json().get("access_token") if answer.is_success else None
        if not isinstance(token, str):
            said = _said(answer)
            raise ToolError(
                f"Google refused to refresh the access token ({answer.status_code} "
                f"{said.get('error') or 'error'}: {said.get('error_description') or ''}). Check "
                f"{settings.how_to_set_these(*REFRESH_FIELDS)}",
                code="bad_credentials" if answer.status_code < 500 else "server_error",
                recoverable=answer.status_code >= 500,
            )
        return token

    def _failure(self, answer: httpx.Response) -> ToolError:
        said_error = _said(answer).get("error")
        error = cast(Json, said_error) if isinstance(said_error, dict) else {}
        message = str(error.get("message") or answer.reason_phrase)
        details = cast(list[JsonValue], error.get("errors") or [])
        reasons = {str(e.get("reason")) for e in details if isinstance(e, dict)}
        status = answer.status_code
        said = (
            f"Google Calendar refused the call ({status} {', '.join(sorted(reasons)) or 'error'}):"
            f" {message}"
        )
        if status == 401:
            how = self._settings.how_to_set_these(*TOKEN_VARIABLES)
            return ToolError(
                f"{said}. Check the token: {how}", code="bad_credentials", recoverable=False
            )
        if status == 429 or (status == 403 and reasons & RATE_LIMITS):
            return ToolError(said, code="rate_limited", recoverable=True)
        if status == 403:
            return ToolError(said, code="refused", recoverable=False)
        if status in (404, 410):
            if self._uid is not None:
                said = f"The calendar has no event with uid {self._uid!r}; list the events to see their uids"
            return ToolError(said, code="not_found", recoverable=False)
        if status >= 500:
            return ToolError(said, code="server_error", recoverable=True)
        return InvalidToolArgumentsError(said)


def event_path(calendar: str, event: str = "") -> str:
    """The path of a calendar's events (or of one), each id quoted."""
    path = f"/calendars/{quote(calendar, safe='')}/events"
    return f"{path}/{quote(event, safe='')}" if event else path


def _page(params: dict[str, str], token: str | None) -> dict[str, str]:
    return params | {"pageToken": token} if token else params


def _said(answer: httpx.Response) -> Json:
    try:
        said = answer.json()
    except ValueError:
        return {}
    return cast(Json, said) if isinstance(said, dict) else {}


def _secret(settings: CalendarSettings, field: str) -> str:
    value = getattr(settings, field)
    return value.get_secret_value() if value else ""


def _unreachable(url: str, error: httpx.TransportError) -> ToolError:
    return ToolError(
        f"Could not reach Google Calendar at {url}: {error or type(error).__name__}",
        code="server_unreachable",
        recoverable=True,
    )
