"""Events as Google Calendar keeps them (its JSON), and as the model reads them (EventFields):
the same fields and times as over CalDAV, whichever provider holds them."""

from __future__ import annotations

from datetime import date, datetime
from email.utils import parseaddr
from typing import cast
from zoneinfo import ZoneInfo

from pydantic import JsonValue

from .event_ical import Attendee, EventFields
from .event_times import shown
from .recurrence import rule_for

Json = dict[str, JsonValue]
# Google's responseStatus as iCalendar's PARTSTAT, the word CalDAV's events give.
ANSWERS = {"accepted": "ACCEPTED", "declined": "DECLINED", "tentative": "TENTATIVE"}


def when(value: JsonValue) -> date:
    """A start, end or originalStartTime: `{"date"}` a day, `{"dateTime"}` a moment."""
    given = cast(Json, value or {})
    if "date" in given:
        return date.fromisoformat(str(given["date"]))
    return datetime.fromisoformat(str(given["dateTime"]))


def time_of(value: date) -> Json:
    """A day as `{"date"}`; a moment (in a zone or UTC, as `stored` gives it) as `{"dateTime",
    "timeZone"}`: Google needs the zone to repeat a series at the same time of day."""
    if not isinstance(value, datetime):
        return {"date": value.isoformat()}
    zone = value.tzinfo.key if isinstance(value.tzinfo, ZoneInfo) else "UTC"
    return {"dateTime": value.isoformat(), "timeZone": zone}


def recurrence_of(rule: str, start: date, zone: ZoneInfo) -> list[JsonValue]:
    """`recurrence` for a series starting at `start` (`none`: not a series)."""
    if rule.lower() == "none":
        return []
    return [f"RRULE:{rule_for(rule, start, zone).to_ical().decode()}"]


def attendees_of(attendees: list[str]) -> list[JsonValue]:
    """Each `Name <address>` or `address` as Google's attendee."""
    found: list[JsonValue] = []
    for attendee in attendees:
        name, address = parseaddr(attendee)
        found.append({"email": address, **({"displayName": name} if name else {})})
    return found


def rule_in(item: Json) -> str | None:
    """The series' RRULE (without `RRULE:`), if `item` is a series."""
    for line in cast(list[str], item.get("recurrence") or []):
        if line.upper().startswith("RRULE:"):
            return line[len("RRULE:") :]
    return None


def fields_of(item: Json, zone: ZoneInfo, *, rule: str | None = None) -> EventFields:
    """`item` as the model reads it; an instance of a series has the series' id as its `uid`,
    its original start as `occurrence`, and the series' `rule`."""
    series = item.get("recurringEventId")
    original = item.get("originalStartTime")
    start = when(item.get("start"))
    return EventFields(
        uid=str(series or item.get("id")),
        summary=str(item.get("summary") or ""),
        start=shown(start, zone).isoformat(),
        end=shown(when(item.get("end")), zone).isoformat(),
        all_day=not isinstance(start, datetime),
        location=str(item.get("location") or "") or None,
        description=str(item.get("description") or "") or None,
        attendees=[
            Attendee(
                email=str(a.get("email")),
                name=str(a.get("displayName") or "") or None,
                status=ANSWERS.get(str(a.get("responseStatus")), "NEEDS-ACTION"),
            )
            for a in cast(list[Json], item.get("attendees") or [])
        ],
        recurrence=rule or rule_in(item),
        occurrence=shown(when(original), zone).isoformat() if series and original else None,
    )
