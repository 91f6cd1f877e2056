"""The agent's actions on Google Calendar (API v3): the same parameters and answers as over
CalDAV; each returns the calendar's name and the event as the model reads it."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

from orchestrator.errors import InvalidToolArgumentsError, ToolError

from .calendar_params import CreateEvent, DeleteEvent, MoveEvent, UpdateEvent
from .calendar_settings import CalendarSettings
from .event_ical import EventFields
from .event_times import stored
from .google_api import GoogleCalendar, Json, event_path
from .google_events import attendees_of, fields_of, recurrence_of, rule_in, time_of, when
from .span import Span, new_times

Done = tuple[str, EventFields]


def list_events(
    settings: CalendarSettings, name: str | None, start: datetime, end: datetime, zone: ZoneInfo
) -> tuple[str, list[EventFields]]:
    """The calendar's name and its events from `start` to `end`, each occurrence of a series
    on its own (`singleEvents`), each with its series' rule."""
    with GoogleCalendar(settings) as google:
        ident, calendar = google.calendar(name)
        window = {"timeMin": start.isoformat(), "timeMax": end.isoformat()}
        items = google.items(
            event_path(ident), window | {"singleEvents": "true", "orderBy": "startTime"}
        )
        items = [item for item in items if item.get("status") != "cancelled"]
        series = {str(item["recurringEventId"]) for item in items if item.get("recurringEventId")}
        rules = {one: rule_in(google.call("GET", event_path(ident, one))) for one in series}
    return calendar, [
        fields_of(item, zone, rule=rules.get(str(item.get("recurringEventId")))) for item in items
    ]


def create_event(
    settings: CalendarSettings, params: CreateEvent, when_: Span, zone: ZoneInfo
) -> Done:
    """events.insert of a new event."""
    start, end = when_
    body: Json = {"summary": params.summary, "start": time_of(start), "end": time_of(end)}
    for field in ("location", "description"):
        if value := getattr(params, field):
            body[field] = value
    if params.recurrence:
        body["recurrence"] = recurrence_of(params.recurrence, start, zone)
    if params.attendees:
        body["attendees"] = attendees_of(params.attendees)
    with GoogleCalendar(settings) as google:
        ident, calendar = google.calendar(params.calendar)
        return calendar, fields_of(google.call("POST", event_path(ident), body=body), zone)


def update_event(
    settings: CalendarSettings, params: UpdateEvent, zone: ZoneInfo
) -> tuple[str, EventFields, EventFields]:
    """events.patch of what is given (a series as a whole); the event after and before."""
    with GoogleCalendar(settings, uid=params.uid) as google:
        ident, calendar = google.calendar(params.calendar)
        item = google.call("GET", event_path(ident, params.uid))
        body = _new_span(item, params.start, params.end, zone)
        for field in ("summary", "location", "description"):
            if (value := getattr(params, field)) is not None:
                body[field] = value
        if params.recurrence is not None:
            start = when(body["start"]) if "start" in body else when(item.get("start"))
            body["recurrence"] = recurrence_of(params.recurrence, start, zone)
        if params.attendees is not None:
            body["attendees"] = attendees_of(params.attendees)
        after = google.call("PATCH", event_path(ident, params.uid), body=body)
    return calendar, fields_of(after, zone), fields_of(item, zone)


def move_event(
    settings: CalendarSettings, params: MoveEvent, zone: ZoneInfo
) -> tuple[str, EventFields, EventFields]:
    """A new start (events.patch, keeping the length), another calendar (events.move), or both."""
    with GoogleCalendar(settings, uid=params.uid) as google:
        ident, calendar = google.calendar(params.calendar)
        item = before = google.call("GET", event_path(ident, params.uid))
        if params.start is not None:
            body = _new_span(item, params.start, None, zone)
            item = google.call("PATCH", event_path(ident, params.uid), body=body)
        if params.to_calendar:
            target, calendar = google.calendar(params.to_calendar)
            if target != ident:
                moved = f"{event_path(ident, params.uid)}/move"
                item = google.call("POST", moved, params={"destination": target})
    return calendar, fields_of(item, zone), fields_of(before, zone)


def delete_event(
    settings: CalendarSettings, params: DeleteEvent, zone: ZoneInfo
) -> tuple[str, EventFields, date | None]:
    """events.delete of the event (a whole series), or of the one instance of the series that
    started at `occurrence` (events.instances finds it); that occurrence as listed."""
    with GoogleCalendar(settings, uid=params.uid) as google:
        ident, calendar = google.calendar(params.calendar)
        item = google.call("GET", event_path(ident, params.uid))
        if params.occurrence is None:
            google.call("DELETE", event_path(ident, params.uid))
            return calendar, fields_of(item, zone), None
        occurrence = _occurrence(item, params.uid, params.occurrence, zone)
        start = occurrence.isoformat() if isinstance(occurrence, datetime) else str(occurrence)
        instances = google.items(
            f"{event_path(ident, params.uid)}/instances", {"originalStart": start}
        )
        found = [i for i in instances if when(i.get("originalStartTime")) == occurrence]
        if not found:
            raise ToolError(
                f"Event {params.uid!r} has no occurrence at {params.occurrence.isoformat()}; list "
                "the events to see them",
                code="not_found",
                recoverable=False,
            )
        google.call("DELETE", event_path(ident, str(found[0].get("id"))))
    shown = occurrence.astimezone(zone) if isinstance(occurrence, datetime) else occurrence
    return calendar, fields_of(item, zone), shown


def _new_span(item: Json, start: datetime | None, end: datetime | None, zone: ZoneInfo) -> Json:
    """The patch of `item`'s start and end (none when neither is given)."""
    if start is None and end is None:
        return {}
    old_start, old_end = when(item.get("start")), when(item.get("end"))
    new_start, new_end = new_times(old_start, old_end - old_start, start, end, zone=zone)
    return {"start": time_of(new_start), "end": time_of(new_end)}


def _occurrence(item: Json, uid: str, given: date, zone: ZoneInfo) -> date:
    """`given` as an occurrence of the series `item` would start, or a clear error."""
    if rule_in(item) is None:
        raise InvalidToolArgumentsError(
            f"Event {uid!r} does not repeat: delete it without occurrence"
        )
    if isinstance(when(item.get("start")), datetime):
        if not isinstance(given, datetime):
            raise InvalidToolArgumentsError(
                f"Event {uid!r} repeats at a time of day: give the occurrence's start time"
            )
        return stored(given, zone)
    return given.date() if isinstance(given, datetime) else given
