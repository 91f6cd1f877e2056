"""The user's calendar over CalDAV: list, create, update, move and delete events (the caldav
library); every time listed in the one zone the settings choose."""

from __future__ import annotations

from contextlib import suppress
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar
import requests
from caldav.calendarobjectresource import CalendarObjectResource
from caldav.collection import Calendar
from caldav.lib import error as dav_error

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .caldav_access import failures, open_calendar
from .calendar_params import CreateEvent, DeleteEvent, ListEvents, MoveEvent, UpdateEvent
from .calendar_settings import CalendarSettings
from .event_ical import (
    EventFields,
    event_fields,
    leave_out,
    mark_changed,
    new_calendar,
    new_event,
    set_attendees,
    set_recurrence,
    set_text,
    set_when,
    shift_exceptions,
)
from .event_times import day_start, stored
from .google_provider import create_event, delete_event, list_events, move_event, update_event
from .recurrence import is_occurrence
from .span import new_span, new_times


class CalendarAgent(Tool):
    """Lists, creates, updates, moves and deletes events on the user's calendar, over CalDAV or
    on Google Calendar (`provider`)."""

    settings_model = CalendarSettings

    @action(ListEvents)
    def list(self, params: ListEvents, request: ToolRequest) -> ToolResult:
        """List the events of a range of days (a week from today by default), recurring ones
        expanded, every time in the configured timezone."""
        settings = self._settings()
        zone = settings.zone()
        first = params.start or datetime.now(zone).date()
        start, end = day_start(first, zone), day_start(first + timedelta(days=params.days), zone)
        if settings.provider == "google":
            name, events = list_events(settings, params.calendar, start, end, zone)
        else:
            with failures(settings):
                calendar = open_calendar(settings, params.calendar)
                found = calendar.search(start=start, end=end, event=True, expand=True)
            name = str(calendar.name)
            events = [event_fields(item.icalendar_component, zone) for item in found]
        events.sort(key=lambda e: _sort_key(e, zone))
        lines = [_line(event) for event in events] or [
            f"No events from {first} for {params.days} days."
        ]
        return request.result(
            "\n".join([*lines, f"Times in {zone.key}."]),
            data={
                "calendar": name,
                "timezone": zone.key,
                "start": start.isoformat(),
                "end": end.isoformat(),
                "events": events,
            },
            metadata={"provider": settings.provider},
        )

    @action(CreateEvent)
    def create(self, params: CreateEvent, request: ToolRequest) -> ToolResult:
        """Create an event (timed or all-day), repeating by an RRULE, with attendees."""
        settings = self._settings()
        zone = settings.zone()
        length = timedelta(minutes=params.duration_minutes)
        start, end = new_span(
            params.start, params.end, all_day=params.all_day, length=length, zone=zone
        )
        if settings.provider == "google":
            name, fields = create_event(settings, params, (start, end), zone)
            return self._result(
                "Created", fields, name, zone=zone, request=request, provider=settings.provider
            )
        event = new_event(summary=params.summary, start=start, end=end)
        set_text(event, "location", params.location)
        set_text(event, "description", params.description)
        if params.recurrence:
            set_recurrence(event, params.recurrence, zone=zone)
        set_attendees(event, params.attendees)
        with failures(settings):
            calendar = open_calendar(settings, params.calendar)
            calendar.save_event(new_calendar(event).to_ical().decode())
        return self._caldav_result("Created", event, calendar, zone=zone, request=request)

    @action(UpdateEvent)
    def update(self, params: UpdateEvent, request: ToolRequest) -> ToolResult:
        """Change an event (a whole series when it repeats): its title, times (a new start
        keeps its length), place, notes, repeat rule or attendees."""
        settings = self._settings()
        zone = settings.zone()
        if settings.provider == "google":
            name, fields, before = update_event(settings, params, zone)
            return self._result(
                "Updated",
                fields,
                name,
                zone=zone,
                request=request,
                provider=settings.provider,
                before=before,
            )
        with failures(settings, uid=params.uid):
            calendar = open_calendar(settings, params.calendar)
            found = calendar.event_by_uid(params.uid)
            event = _master(found)
            before = event_fields(event, zone)
            _reschedule(found, event, params.start, params.end, zone=zone)
            set_text(event, "summary", params.summary)
            set_text(event, "location", params.location)
            set_text(event, "description", params.description)
            if params.recurrence is not None:
                set_recurrence(event, params.recurrence, zone=zone)
            if params.attendees is not None:
                set_attendees(event, params.attendees)
            _save(found, event)
        return self._caldav_result(
            "Updated", event, calendar, zone=zone, request=request, before=before
        )

    @action(MoveEvent)
    def move(self, params: MoveEvent, request: ToolRequest) -> ToolResult:
        """Move an event to a new start (keeping its length), to another calendar, or both."""
        settings = self._settings()
        zone = settings.zone()
        if settings.provider == "google":
            name, fields, before = move_event(settings, params, zone)
            return self._result(
                "Moved",
                fields,
                name,
                zone=zone,
                request=request,
                provider=settings.provider,
                before=before,
            )
        with failures(settings, uid=params.uid):
            calendar = open_calendar(settings, params.calendar)
            found = calendar.event_by_uid(params.uid)
            event = _master(found)
            before = event_fields(event, zone)
            _reschedule(found, event, params.start, None, zone=zone)
            target = open_calendar(settings, params.to_calendar) if params.to_calendar else calendar
            if target.url == calendar.url:
                _save(found, event)
            else:
                _move_between(found, event, target)
        return self._caldav_result(
            "Moved", event, target, zone=zone, request=request, before=before
        )

    @action(DeleteEvent, sensitive=True)
    def delete(self, params: DeleteEvent, request: ToolRequest) -> ToolResult:
        """Delete an event by its uid (a whole series), or one occurrence of a recurring one."""
        settings = self._settings()
        zone = settings.zone()
        if settings.provider == "google":
            name, fields, shown = delete_event(settings, params, zone)
        else:
            name, fields, shown = _caldav_delete(settings, params, zone)
        done, extra = "Deleted", {"deleted": True}
        if shown is not None:
            done = f"Deleted the {shown.isoformat()} occurrence of"
            extra = {"deleted_occurrence": shown.isoformat()}
        return self._result(
            done, fields, name, zone=zone, request=request, provider=settings.provider, **extra
        )

    def _settings(self) -> CalendarSettings:
        return self.settings(CalendarSettings)

    def _caldav_result(
        self,
        done: str,
        event: icalendar.Event,
        calendar: Calendar,
        *,
        zone: ZoneInfo,
        request: ToolRequest,
        **extra: object,
    ) -> ToolResult:
        fields = event_fields(event, zone)
        return self._result(
            done, fields, str(calendar.name), zone=zone, request=request, provider="caldav", **extra
        )

    def _result(
        self,
        done: str,
        fields: EventFields,
        calendar: str,
        *,
        zone: ZoneInfo,
        request: ToolRequest,
        provider: str,
        **extra: object,
    ) -> ToolResult:
        where = "from" if done == "Deleted" else "on"
        return request.result(
            f"{done} {_line(fields)} {where} {calendar} (times in {zone.key}).",
            data={"calendar": calendar, "timezone": zone.key, **fields, **extra},
            metadata={"provider": provider},
        )


def _caldav_delete(
    settings: CalendarSettings, params: DeleteEvent, zone: ZoneInfo
) -> tuple[str, EventFields, date | None]:
    """Delete the event (a whole series), or leave one occurrence out of the series."""
    with failures(settings, uid=params.uid):
        calendar = open_calendar(settings, params.calendar)
        found = calendar.event_by_uid(params.uid)
        event = _master(found)
        if params.occurrence is None:
            fields = event_fields(event, zone)
            found.delete()
            return str(calendar.name), fields, None
        occurrence = _occurrence(found.icalendar_instance, event, params.occurrence, zone=zone)
        leave_out(found.icalendar_instance, event, occurrence)
        _save(found, event)
    shown = occurrence.astimezone(zone) if isinstance(occurrence, datetime) else occurrence
    return str(calendar.name), event_fields(event, zone), shown


def _reschedule(
    found: CalendarObjectResource,
    event: icalendar.Event,
    start: datetime | None,
    end: datetime | None,
    *,
    zone: ZoneInfo,
) -> None:
    """New times for `event`, of its kind (days stay days); a new start alone keeps the length;
    a series' left-out and changed occurrences move with it."""
    if start is None and end is None:
        return
    old_start = event.start
    new_start, new_end = new_times(old_start, event.duration, start, end, zone=zone)
    set_when(event, new_start, new_end)
    shift_exceptions(found.icalendar_instance, event, by=new_start - old_start)


def _occurrence(
    calendar: icalendar.Calendar, event: icalendar.Event, given: date, *, zone: ZoneInfo
) -> date:
    """`given` as an occurrence of the series `event`, or a clear error."""
    uid = event.uid
    if not event.rrules and not event.rdates:
        raise InvalidToolArgumentsError(
            f"Event {uid!r} does not repeat: delete it without occurrence"
        )
    start = event.start
    if isinstance(start, datetime):
        if not isinstance(given, datetime):
            raise InvalidToolArgumentsError(
                f"Event {uid!r} repeats at a time of day: give the occurrence's start time"
            )
        occurrence: date = stored(given, zone)
        if start.tzinfo is None:  # a floating series: read in the listing's zone
            occurrence = occurrence.astimezone(zone).replace(tzinfo=None)
    else:
        occurrence = given.date() if isinstance(given, datetime) else given
    if not is_occurrence(calendar, uid, occurrence):
        raise ToolError(
            f"Event {uid!r} has no occurrence at {given.isoformat()}; list the events to see them",
            code="not_found",
            recoverable=False,
        )
    return occurrence


def _master(found: CalendarObjectResource) -> icalendar.Event:
    """The event itself, or the series (not one occurrence's changed copy)."""
    events = found.icalendar_instance.events
    return next((e for e in events if e.RECURRENCE_ID is None), events[0])


def _move_between(found: CalendarObjectResource, event: icalendar.Event, target: Calendar) -> None:
    """Save the event in `target`, then delete it where it was. Never in neither calendar:
    when the old one may not delete it (read-only), the copy goes and the error is said."""
    mark_changed(event)
    found.icalendar_instance.add_missing_timezones()
    copy = target.save_event(found.icalendar_instance.to_ical().decode())
    try:
        found.delete()
    except (dav_error.DAVError, requests.exceptions.RequestException):
        with suppress(dav_error.DAVError, requests.exceptions.RequestException):
            copy.delete()  # best effort: at worst it is in both, which loses nothing
        raise


def _save(found: CalendarObjectResource, event: icalendar.Event) -> None:
    mark_changed(event)
    instance = found.icalendar_instance
    instance.add_missing_timezones()
    found.icalendar_instance = instance
    found.save()


def _sort_key(event: EventFields, zone: ZoneInfo) -> datetime:
    if event["all_day"]:
        return day_start(date.fromisoformat(event["start"]), zone)
    return datetime.fromisoformat(event["start"])


def _line(event: EventFields) -> str:
    start, end = event["start"], event["end"]
    if event["all_day"]:
        when = start
    else:
        same_day = start[:10] == end[:10]
        when = (
            f"{start[:10]} {start[11:16]}-{end[11:16] if same_day else end[:16].replace('T', ' ')}"
        )
    where = f" at {event['location']}" if event["location"] else ""
    names = [attendee["name"] or attendee["email"] for attendee in event["attendees"]]
    who = f" with {', '.join(names)}" if names else ""
    repeats = ", repeats" if event["recurrence"] or event["occurrence"] else ""
    return f"{when} {event['summary']}{where}{who} (uid {event['uid']}{repeats})"
