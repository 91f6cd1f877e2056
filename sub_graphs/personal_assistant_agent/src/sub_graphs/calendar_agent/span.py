"""An event's start and end as stored: a new event's, and an event's after a reschedule."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from orchestrator.errors import InvalidToolArgumentsError

from .event_times import stored

Span = tuple[date, date]


def new_span(
    start: datetime, end: datetime | None, *, all_day: bool, length: timedelta, zone: ZoneInfo
) -> Span:
    """Start and end as stored: days (the end day included), or times (`length` long when no
    end is given)."""
    if all_day:
        return start.date(), (end or start).date() + timedelta(days=1)
    first = stored(start, zone)
    return first, stored(end, zone) if end else first + length


def new_times(
    old_start: date,
    length: timedelta,
    start: datetime | None,
    end: datetime | None,
    *,
    zone: ZoneInfo,
) -> Span:
    """New times of an event of `length` from `old_start`, of its kind (days stay days); a new
    start alone keeps the length."""
    if isinstance(old_start, datetime):
        new_start: date = stored(start, zone) if start else old_start
        new_end: date = stored(end, zone) if end else new_start + length
    else:
        new_start = start.date() if start else old_start
        new_end = end.date() + timedelta(days=1) if end else new_start + length
    if new_end < new_start:
        raise InvalidToolArgumentsError("end is before start")
    return new_start, new_end
