"""A due date as people say it: `2026-12-24`, `tomorrow`, `next Friday`, `in 3 days`, `Dec 5`.

ISO dates are read as they are; words by dateparser (the well-kept reader of dates in
words, in many languages), against today's date on this machine, preferring the future
(`Friday` is the next one, not the last).
"""

from __future__ import annotations

from datetime import date, datetime, time

UNREAD = (
    "cannot read {value!r} as a date: write YYYY-MM-DD, or words such as 'tomorrow', "
    "'next Friday', 'in 3 days' or 'Dec 5'"
)
NO_READER = (
    "due dates in words need dateparser (pip install 'dateparser>=1.2', as "
    "`orchestrator tools install task_agent` does): write YYYY-MM-DD instead"
)


def due_date(value: object, *, today: date | None = None) -> object:
    """`value` as a date when it is text (ISO or words); anything else for pydantic to judge.

    Raises ValueError, which pydantic reports as the field's problem, for text that is no date.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    try:
        import dateparser  # only for words: its languages' data take a while to load
    except ImportError:
        raise ValueError(NO_READER) from None
    base = datetime.combine(today or date.today(), time(12))
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": "future"}
    parsed = dateparser.parse(text, settings=settings)  # pyright: ignore[reportArgumentType]  # its settings are a plain dict
    if parsed is None:
        raise ValueError(UNREAD.format(value=value))
    return parsed.date()
