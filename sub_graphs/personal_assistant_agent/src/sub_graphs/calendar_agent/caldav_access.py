"""The CalDAV account the settings describe, its calendar, events as iCalendar, errors said plainly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import caldav
import icalendar
import requests
from caldav.calendarobjectresource import CalendarObjectResource
from caldav.collection import Calendar
from caldav.lib import error as dav_error
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from orchestrator.errors import ToolError
from orchestrator.tools import ToolSettings

PRODID = "-//orchestrator//calendar_agent//EN"


class CalendarSettings(ToolSettings):
    """The account: `config` of tool_config.yaml, overridden by CALENDAR_AGENT_* variables."""

    model_config = SettingsConfigDict(env_prefix="CALENDAR_AGENT_")

    url: str
    username: str | None = None
    password: SecretStr | None = None
    calendar: str | None = None
    timezone: str = "UTC"
    timeout_seconds: int = Field(default=30, ge=1)

    def zone(self) -> ZoneInfo:
        """The zone of times given without one."""
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(
                f"calendar_agent's timezone {self.timezone!r} is not an IANA zone (e.g. Europe/Paris)",
                code="not_configured",
                recoverable=False,
            ) from None


def open_calendar(settings: CalendarSettings, name: str | None) -> Calendar:
    """The calendar named `name`, else the configured one, else the account's first."""
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


def new_event(
    *,
    summary: str,
    start: datetime | date,
    end: datetime | date,
    location: str | None,
    description: str | None,
) -> tuple[str, str]:
    """(uid, iCalendar text) of a new event."""
    event = icalendar.Event()
    uid = f"{uuid.uuid4()}@orchestrator"
    event.add("uid", uid)
    event.add("dtstamp", datetime.now(UTC))
    event.add("summary", summary)
    event.add("dtstart", start)
    event.add("dtend", end)
    if location:
        event.add("location", location)
    if description:
        event.add("description", description)
    calendar = icalendar.Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add_component(event)
    return uid, calendar.to_ical().decode()


def event_fields(found: CalendarObjectResource) -> dict[str, object]:
    """An event as the model reads it: uid, summary, start, end (ISO), all_day, where, what."""
    component = found.icalendar_component
    start = component.get("dtstart").dt
    end_field = component.get("dtend")
    end = end_field.dt if end_field is not None else start
    return {
        "uid": str(component.get("uid", "")),
        "summary": str(component.get("summary", "")),
        "start": start.isoformat(),
        "end": end.isoformat(),
        "all_day": not isinstance(start, datetime),
        "location": str(component["location"]) if "location" in component else None,
        "description": str(component["description"]) if "description" in component else None,
    }


def day_start(day: date, zone: ZoneInfo) -> datetime:
    """Midnight of `day` in `zone`."""
    return datetime.combine(day, datetime.min.time(), tzinfo=zone)


def aware(moment: datetime, zone: ZoneInfo) -> datetime:
    """`moment` in `zone` when it names none."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


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
