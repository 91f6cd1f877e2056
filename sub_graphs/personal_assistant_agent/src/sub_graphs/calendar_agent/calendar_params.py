"""What each action of calendar_agent takes, checked before the server is asked anything."""

from __future__ import annotations

from datetime import date, datetime
from email.utils import parseaddr

from pydantic import BaseModel, Field, field_validator, model_validator

from .recurrence import checked_rule

CALENDAR = "The calendar's name; the configured (or first) one when left out."
UID = "The event's uid, as list or create gave it."
WHEN = "YYYY-MM-DDTHH:MM, in the configured timezone unless an offset or Z is given"
RECURRENCE = (
    "How it repeats, an iCalendar RRULE: FREQ=DAILY|WEEKLY|MONTHLY|YEARLY with INTERVAL, "
    "BYDAY=MO,WE, COUNT=10 or UNTIL=20261231 (e.g. FREQ=WEEKLY;BYDAY=MO;COUNT=10)"
)
ATTENDEES = "Who is invited: email addresses, each optionally with a name (Bo <bo@example.com>)."


def _checked_attendees(attendees: list[str] | None) -> list[str] | None:
    for attendee in attendees or []:
        address = parseaddr(attendee)[1]
        local, _, domain = address.partition("@")
        if not local or "." not in domain or " " in address:
            raise ValueError(f"{attendee!r} is not an email address")
    return attendees


def _ends_after_it_starts(start: datetime | None, end: datetime | None) -> None:
    if start is None or end is None:
        return
    if (start.tzinfo is None) != (end.tzinfo is None):
        start, end = start.replace(tzinfo=None), end.replace(tzinfo=None)
    if end < start:
        raise ValueError("end is before start")


class ListEvents(BaseModel):
    start: date | None = Field(
        default=None, description="First day, YYYY-MM-DD; today if left out."
    )
    days: int = Field(default=7, ge=1, le=366, description="How many days from start.")
    calendar: str | None = Field(default=None, description=CALENDAR)


class CreateEvent(BaseModel):
    summary: str = Field(min_length=1, max_length=500, description="The event's title.")
    start: datetime = Field(description=f"When it starts, {WHEN}.")
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
    recurrence: str | None = Field(default=None, description=RECURRENCE)
    attendees: list[str] = Field(default_factory=list, max_length=100, description=ATTENDEES)
    calendar: str | None = Field(default=None, description=CALENDAR)

    _attendees = field_validator("attendees")(_checked_attendees)

    @field_validator("recurrence")
    @classmethod
    def _a_rule(cls, value: str | None) -> str | None:
        return checked_rule(value) if value else None

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> CreateEvent:
        _ends_after_it_starts(self.start, self.end)
        return self


class UpdateEvent(BaseModel):
    uid: str = Field(min_length=1, description=UID)
    summary: str | None = Field(default=None, min_length=1, max_length=500)
    start: datetime | None = Field(
        default=None, description=f"A new start, {WHEN}; keeps the length unless end is given."
    )
    end: datetime | None = Field(default=None, description="A new end.")
    location: str | None = Field(default=None, description="A new place; empty removes it.")
    description: str | None = Field(default=None, description="New notes; empty removes them.")
    recurrence: str | None = Field(
        default=None, description=f"A new repeat rule, or none to stop repeating. {RECURRENCE}"
    )
    attendees: list[str] | None = Field(
        default=None, max_length=100, description=f"The new list of attendees. {ATTENDEES}"
    )
    calendar: str | None = Field(default=None, description=CALENDAR)

    _attendees = field_validator("attendees")(_checked_attendees)

    @field_validator("recurrence")
    @classmethod
    def _a_rule(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return "none" if value.strip().lower() == "none" else checked_rule(value)

    @model_validator(mode="after")
    def _a_change(self) -> UpdateEvent:
        changes = (self.summary, self.start, self.end, self.location, self.description)
        if all(value is None for value in (*changes, self.recurrence, self.attendees)):
            raise ValueError("nothing to change: give summary, start, end, location, ...")
        _ends_after_it_starts(self.start, self.end)
        return self


class MoveEvent(BaseModel):
    uid: str = Field(min_length=1, description=UID)
    start: datetime | None = Field(
        default=None, description=f"Its new start, {WHEN}; it keeps its length."
    )
    to_calendar: str | None = Field(
        default=None, description="Another calendar of the account to move it to."
    )
    calendar: str | None = Field(default=None, description=CALENDAR)

    @model_validator(mode="after")
    def _somewhere(self) -> MoveEvent:
        if self.start is None and self.to_calendar is None:
            raise ValueError("give start (a new time), to_calendar, or both")
        return self


class DeleteEvent(BaseModel):
    uid: str = Field(min_length=1, description=UID)
    occurrence: datetime | date | None = Field(
        default=None,
        description=(
            "Only this occurrence of a recurring event: its `occurrence` as list gave it "
            "(the whole series when left out)."
        ),
    )
    calendar: str | None = Field(default=None, description=CALENDAR)

    @field_validator("occurrence", mode="before")
    @classmethod
    def _a_day_stays_a_day(cls, value: object) -> object:
        # pydantic reads "2026-12-08" as midnight; an all-day series' occurrence is the day itself
        if isinstance(value, str) and len(value.strip()) == len("YYYY-MM-DD"):
            return date.fromisoformat(value.strip())
        return value
