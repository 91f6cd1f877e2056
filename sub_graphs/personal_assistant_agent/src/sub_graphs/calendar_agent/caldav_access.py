"""The CalDAV account the settings describe, its calendars, and its errors said plainly."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import caldav
import requests
from caldav.collection import Calendar
from caldav.lib import error as dav_error

from orchestrator.errors import ToolError

from .calendar_settings import CalendarSettings


def open_calendar(settings: CalendarSettings, name: str | None) -> Calendar:
    """The calendar named `name`, else the configured one, else the account's first."""
    assert settings.url is not None  # CalendarSettings requires it of CalDAV
    client = caldav.DAVClient(
        url=settings.url,
        username=settings.username,
        password=settings.password.get_secret_value() if settings.password else None,
        timeout=settings.timeout_seconds,
    )
    calendars = client.principal().calendars()
    wanted = name or settings.calendar
    if wanted is None:
        if not calendars:
            raise ToolError(
                "The CalDAV account has no calendar", code="not_found", recoverable=False
            )
        return calendars[0]
    for calendar in calendars:
        if (calendar.name or "").lower() == wanted.lower() or str(calendar.url).rstrip(
            "/"
        ) == wanted.rstrip("/"):
            return calendar
    names = ", ".join(repr(c.name) for c in calendars) or "none"
    raise ToolError(
        f"There is no calendar {wanted!r}; the account has: {names}",
        code="not_found",
        recoverable=False,
    )


@contextmanager
def failures(settings: CalendarSettings, *, uid: str | None = None) -> Iterator[None]:
    """CalDAV's errors as ToolErrors: bad login, refused, not found, unreachable."""
    try:
        yield
    except dav_error.AuthorizationError as error:
        if "forbidden" in str(error.reason).lower():
            raise ToolError(
                f"The CalDAV server refused access: {error.reason}",
                code="refused",
                recoverable=False,
            ) from None
        raise ToolError(
            f"The CalDAV server refused the login of {settings.username!r}: {error.reason} "
            "(check CALENDAR_AGENT_USERNAME and CALENDAR_AGENT_PASSWORD)",
            code="bad_credentials",
            recoverable=False,
        ) from None
    except dav_error.NotFoundError:
        what = f"no event with uid {uid!r}" if uid else f"nothing at {settings.url}"
        raise ToolError(
            f"The calendar has {what}; list the events to see their uids"
            if uid
            else f"There is {what}",
            code="not_found",
            recoverable=False,
        ) from None
    except requests.exceptions.RequestException as error:
        raise ToolError(
            f"Could not reach the CalDAV server at {settings.url}: {type(error).__name__}",
            code="server_unreachable",
        ) from None
    except dav_error.DAVError as error:
        raise ToolError(
            f"The CalDAV server refused the call: {error}", code="caldav_error"
        ) from None
