"""Times as stored (a real zone or UTC, never a bare offset) and as shown (the one chosen zone)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo


def stored(moment: datetime, zone: ZoneInfo) -> datetime:
    """`moment` as the event keeps it: in `zone` when it names none, in UTC when it names a bare
    offset (iCalendar has no TZID for `+09:00`: it would need a VTIMEZONE no client knows)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=zone)
    if isinstance(moment.tzinfo, ZoneInfo):
        return moment
    return moment.astimezone(UTC)


def shown(value: date, zone: ZoneInfo) -> date:
    """A stored start or end in the listing's zone: a floating time is read in it; a day stays."""
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=zone)
    return value.astimezone(zone)


def day_start(day: date, zone: ZoneInfo) -> datetime:
    """Midnight of `day` in `zone`."""
    return datetime.combine(day, datetime.min.time(), tzinfo=zone)
