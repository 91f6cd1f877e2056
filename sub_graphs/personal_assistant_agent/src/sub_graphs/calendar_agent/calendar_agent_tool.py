"""The user's calendar over CalDAV: list events, create one, delete one (the caldav library)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from pydantic import BaseModel, Field, model_validator

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

from .caldav_access import (
    CalendarSettings,
    aware,
    day_start,
    event_fields,
    failures,
    new_event,
    open_calendar,
)

CALENDAR = "The calendar's name; the configured (or first) one when left out."


class ListEvents(BaseModel):
    start: date | None = Field(
        default=None, description="First day, YYYY-MM-DD; today if left out."
    )
    days: int = Field(default=7, ge=1, le=366, description="How many days from start.")
    calendar: str | None = Field(default=None, description=CALENDAR)


class CreateEvent(BaseModel):
    summary: str = Field(min_length=1, max_length=500, description="The event's title.")
    start: datetime = Field(
        description="When it starts, YYYY-MM-DDTHH:MM (the configured timezone unless one is given)."
    )
    end: datetime | None = Field(
        default=None, description="When it ends; start + duration if left out."
    )
    duration_minutes: int = Field(
        default=60, ge=1, le=60 * 24 * 14, description="Used without end."
    )
    all_day: bool = Field(
        default=False, description="An all-day event on start's day (through end's)."
    )
    location: str | None = Field(default=None, description="Where it takes place.")
    description: str | None = Field(default=None, description="Notes for the event.")
    calendar: str | None = Field(default=None, description=CALENDAR)

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> CreateEvent:
        if self.end is not None and self.end.replace(tzinfo=None) < self.start.replace(tzinfo=None):
            raise ValueError("end is before start")
        return self


class DeleteEvent(BaseModel):
    uid: str = Field(min_length=1, description="The event's uid, as list or create gave it.")
    calendar: str | None = Field(default=None, description=CALENDAR)


class CalendarAgent(Tool):
    """Lists, creates and deletes events on the user's CalDAV calendar."""

    settings_model = CalendarSettings

    @action(ListEvents)
    def list(self, params: ListEvents, request: ToolRequest) -> ToolResult:
        """List the events of a range of days (a week from today by default)."""
        settings = self._settings()
        zone = settings.zone()
        first = params.start or datetime.now(zone).date()
        start, end = day_start(first, zone), day_start(first + timedelta(days=params.days), zone)
        with failures(settings):
            calendar = open_calendar(settings, params.calendar)
            found = calendar.search(start=start, end=end, event=True, expand=True)
        events = sorted((event_fields(item) for item in found), key=lambda e: str(e["start"]))
        lines = [_line(event) for event in events] or [
            f"No events from {first} for {params.days} days."
        ]
        return request.result(
            "\n".join(lines),
            data={
                "calendar": calendar.name,
                "start": start.isoformat(),
                "end": end.isoformat(),
                "events": events,
            },
            metadata={"provider": "caldav"},
        )

    @action(CreateEvent)
    def create(self, params: CreateEvent, request: ToolRequest) -> ToolResult:
        """Create an event (timed, or all-day) on the calendar."""
        settings = self._settings()
        zone = settings.zone()
        start: datetime | date
        if params.all_day:
            start = params.start.date()
            end: datetime | date = (params.end.date() if params.end else start) + timedelta(days=1)
        else:
            start = aware(params.start, zone)
            end = (
                aware(params.end, zone)
                if params.end
                else start + timedelta(minutes=params.duration_minutes)
            )
        uid, ical = new_event(
            summary=params.summary,
            start=start,
            end=end,
            location=params.location,
            description=params.description,
        )
        with failures(settings):
            calendar = open_calendar(settings, params.calendar)
            calendar.save_event(ical)
        event = {
            "uid": uid,
            "summary": params.summary,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "all_day": params.all_day,
            "location": params.location,
            "description": params.description,
        }
        return request.result(
            f"Created {_line(event)} on {calendar.name}.",
            data={"calendar": calendar.name, **event},
            metadata={"provider": "caldav"},
        )

    @action(DeleteEvent, sensitive=True)
    def delete(self, params: DeleteEvent, request: ToolRequest) -> ToolResult:
        """Delete an event from the calendar by its uid."""
        settings = self._settings()
        with failures(settings, uid=params.uid):
            calendar = open_calendar(settings, params.calendar)
            found = calendar.event_by_uid(params.uid)
            event = event_fields(found)
            found.delete()
        return request.result(
            f"Deleted {_line(event)} from {calendar.name}.",
            data={"calendar": calendar.name, **event, "deleted": True},
            metadata={"provider": "caldav"},
        )

    def _settings(self) -> CalendarSettings:
        return self.settings(CalendarSettings)


def _line(event: dict[str, object]) -> str:
    start, end = str(event["start"]), str(event["end"])
    if event["all_day"]:
        when = start
    else:
        same_day = start[:10] == end[:10]
        when = (
            f"{start[:10]} {start[11:16]}-{end[11:16] if same_day else end[:16].replace('T', ' ')}"
        )
    where = f" at {event['location']}" if event.get("location") else ""
    return f"{when} {event['summary']}{where} (uid {event['uid']})"
