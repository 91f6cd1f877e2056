"""Events as iCalendar: a new one, changes to one, one occurrence left out, and how one reads."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from email.utils import parseaddr
from typing import TypedDict
from zoneinfo import ZoneInfo

import icalendar

from .event_times import shown
from .recurrence import rule_for

PRODID = "-//orchestrator//calendar_agent//EN"


class Attendee(TypedDict):
    """One invited person: address, name, answer (NEEDS-ACTION, ACCEPTED, DECLINED...)."""

    email: str
    name: str | None
    status: str


class EventFields(TypedDict):
    """An event as the model reads it (see `event_fields`)."""

    uid: str
    summary: str
    start: str
    end: str
    all_day: bool
    location: str | None
    description: str | None
    attendees: list[Attendee]
    recurrence: str | None
    occurrence: str | None


def new_calendar(event: icalendar.Event) -> icalendar.Calendar:
    """A VCALENDAR holding `event`, with the VTIMEZONE of each zone its times name."""
    calendar = icalendar.Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add_component(event)
    calendar.add_missing_timezones()
    return calendar


def new_event(*, summary: str, start: date, end: date) -> icalendar.Event:
    """A new event with its own uid."""
    event = icalendar.Event()
    event.add("uid", f"{uuid.uuid4()}@orchestrator")
    event.add("dtstamp", datetime.now(UTC))
    event.add("summary", summary)
    set_when(event, start, end)
    return event


def set_when(event: icalendar.Event, start: date, end: date) -> None:
    """Set DTSTART and DTEND (a DURATION the event had goes: DTEND says the same)."""
    event.pop("DURATION", None)
    event.DTSTART = start
    event.DTEND = end


def set_text(event: icalendar.Event, name: str, value: str | None) -> None:
    """Set a text property; an empty value removes it, None leaves it as it is."""
    if value is None:
        return
    event.pop(name, None)
    if value:
        event.add(name, value)


def set_recurrence(event: icalendar.Event, rule: str, *, zone: ZoneInfo) -> None:
    """Make the event repeat by `rule` (`none` stops it repeating; past exceptions go too)."""
    for name in ("RRULE", "EXDATE"):
        event.pop(name, None)
    if rule.lower() != "none":
        event.add("rrule", rule_for(rule, event.start, zone))


def set_attendees(event: icalendar.Event, attendees: list[str]) -> None:
    """Invite exactly `attendees` (`Name <address>` or `address`), each yet to answer."""
    invited: list[icalendar.vCalAddress] = []
    for attendee in attendees:
        name, address = parseaddr(attendee)
        invited.append(
            icalendar.vCalAddress.new(
                address, cn=name or None, role="REQ-PARTICIPANT", partstat="NEEDS-ACTION", rsvp=True
            )
        )
    event.attendees = invited


def mark_changed(event: icalendar.Event) -> None:
    """What RFC 5545 asks of a changed event: a new DTSTAMP and LAST-MODIFIED, and a SEQUENCE
    for caldav's save to count one up (it does whenever the event has one, and only then)."""
    now = datetime.now(UTC)
    event.DTSTAMP = now
    event.LAST_MODIFIED = now
    event.sequence = event.sequence


def leave_out(calendar: icalendar.Calendar, master: icalendar.Event, occurrence: date) -> None:
    """Leave `occurrence` (of the start's kind) out of the series: an EXDATE in the start's
    zone, and the occurrence's own changed copy (RECURRENCE-ID) removed."""
    start = master.start
    if isinstance(start, datetime) and start.tzinfo is not None:
        assert isinstance(occurrence, datetime)  # _occurrence gave it the start's kind
        occurrence = occurrence.astimezone(start.tzinfo)
    master.exdates = [*master.exdates, occurrence]
    calendar.subcomponents = [
        component
        for component in calendar.subcomponents
        if not (isinstance(component, icalendar.Event) and occurrence == component.RECURRENCE_ID)
    ]


def shift_exceptions(
    calendar: icalendar.Calendar, master: icalendar.Event, *, by: timedelta
) -> None:
    """Move a series' left-out occurrences (EXDATE) and changed ones (RECURRENCE-ID) `by` as
    far as its start moved, so that they stay the same occurrences."""
    if not by:
        return
    master.exdates = [day + by for day in master.exdates]
    for event in calendar.events:
        if event.RECURRENCE_ID is not None:
            event.RECURRENCE_ID = event.RECURRENCE_ID + by


def attendees_of(event: icalendar.Event) -> list[Attendee]:
    """Each attendee of `event`."""
    return [
        Attendee(email=attendee.email, name=attendee.name or None, status=attendee.PARTSTAT)
        for attendee in event.attendees
    ]


def event_fields(event: icalendar.Event, zone: ZoneInfo) -> EventFields:
    """An event as the model reads it, its times ISO 8601 in `zone` (with the offset), a day for
    an all-day one; `occurrence` says which one of a series it is (for deleting just it)."""
    start = event.start
    recurrence_id = event.RECURRENCE_ID
    return EventFields(
        uid=event.uid,
        summary=event.summary or "",
        start=shown(start, zone).isoformat(),
        end=shown(event.end, zone).isoformat(),
        all_day=not isinstance(start, datetime),
        location=event.location,
        description=event.description,
        attendees=attendees_of(event),
        recurrence=event.rrules[0].to_ical().decode() if event.rrules else None,
        occurrence=shown(recurrence_id, zone).isoformat() if recurrence_id else None,
    )
