"""Recurring events: the rule as iCalendar keeps it, and the occurrences of a series."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import icalendar
import recurring_ical_events
from dateutil.rrule import rrulestr


def checked_rule(text: str) -> str:
    """An RFC 5545 RRULE as given (`RRULE:` optional), or a ValueError saying what is wrong."""
    rule = text.strip().removeprefix("RRULE:").removeprefix("rrule:").upper()
    try:
        icalendar.vRecur.from_ical(rule)
        rrulestr(rule, dtstart=datetime(2000, 1, 1))
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"{text!r} is not an RRULE ({error}); e.g. FREQ=WEEKLY;BYDAY=MO,WE;COUNT=10"
        ) from None
    return rule


def rule_for(rule: str, start: date, zone: ZoneInfo) -> icalendar.vRecur:
    """The rule for a series starting at `start`: its UNTIL of the same kind as `start`, as RFC
    5545 requires (a day for an all-day series, a UTC time for a timed one, `zone`'s end of day
    for a bare date)."""
    parsed = icalendar.vRecur(icalendar.vRecur.from_ical(rule))
    untils: list[date] | None = parsed.get("UNTIL")
    if not untils:
        return parsed
    until = untils[0]
    if not isinstance(start, datetime):
        parsed["UNTIL"] = [until.date() if isinstance(until, datetime) else until]
        return parsed
    if not isinstance(until, datetime):
        until = datetime.combine(until, time(23, 59, 59), tzinfo=zone)
    elif until.tzinfo is None:
        until = until.replace(tzinfo=zone)
    parsed["UNTIL"] = [until.astimezone(UTC)]
    return parsed


def is_occurrence(calendar: icalendar.Calendar, uid: str, occurrence: date) -> bool:
    """Whether the series `uid` in `calendar` has an occurrence starting (originally) at
    `occurrence`: a moved one by its RECURRENCE-ID, the others by the rule."""
    if any(occurrence == event.RECURRENCE_ID for event in calendar.events):
        return True
    width = timedelta(days=1) if not isinstance(occurrence, datetime) else timedelta(seconds=1)
    return any(
        isinstance(found, icalendar.Event) and found.uid == uid and found.start == occurrence
        for found in recurring_ical_events.of(calendar).between(occurrence, occurrence + width)
    )
