"""calendar_agent against a Radicale CalDAV server on 127.0.0.1 (the real caldav client)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import caldav
import icalendar
import pytest
import tzlocal

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.integrations.caldav_server import PASSWORD, USER, RadicaleServer
from tests.integrations.folders import approved_copy, free_port
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "personal_assistant_agent" / "src" / "sub_graphs" / "calendar_agent"


@pytest.fixture
def radicale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RadicaleServer]:
    """Radicale with the user's two calendars, Work (the first) and Home; the agent pointed at it."""
    with RadicaleServer(tmp_path / "radicale") as server:
        principal = caldav.DAVClient(url=server.url, username=USER, password=PASSWORD).principal()
        principal.make_calendar(name="Work", cal_id="work")
        principal.make_calendar(name="Home", cal_id="home")
        for name, value in {
            "URL": server.url,
            "USERNAME": USER,
            "PASSWORD": PASSWORD,
            "TIMEZONE": "Europe/Paris",
        }.items():
            monkeypatch.setenv(f"CALENDAR_AGENT_{name}", value)
        yield server


@functools.cache
def agent() -> Tool:
    return load_tool_folder(FOLDER)


async def call(action: str, **parameters: object):
    return await agent().execute(ToolRequest(request_id="r1", action=action, parameters=parameters))


def events_on_the_server(server: RadicaleServer, calendar: str) -> list[str]:
    principal = caldav.DAVClient(url=server.url, username=USER, password=PASSWORD).principal()
    found = principal.calendar(name=calendar).events()
    return sorted(str(event.icalendar_component["summary"]) for event in found)


async def test_create_list_and_delete_events(radicale: RadicaleServer):
    dentist = await call("create", summary="Dentist", start="2026-12-01T10:00", location="Main St")
    holiday = await call("create", summary="Holiday", start="2026-12-02T00:00", all_day=True)
    call_ = await call(
        "create", summary="Call", start="2026-12-03T09:00Z", duration_minutes=30, calendar="Home"
    )
    work = await call("list", start="2026-12-01", days=3)
    home = await call("list", start="2026-12-01", days=7, calendar="home")
    deleted = await call("delete", uid=dentist.data["uid"])

    assert (
        dentist.message
        == f"Created 2026-12-01 10:00-11:00 Dentist at Main St (uid {dentist.data['uid']}) on Work"
        " (times in Europe/Paris)."
    )
    assert dentist.data["start"] == "2026-12-01T10:00:00+01:00", (
        "a time without a zone is in the configured one"
    )
    assert (holiday.data["start"], holiday.data["end"]) == ("2026-12-02", "2026-12-03")
    assert call_.data["end"] == "2026-12-03T10:30:00+01:00", "shown in the configured zone"
    assert [(e["summary"], e["all_day"]) for e in work.data["events"]] == [
        ("Dentist", False),
        ("Holiday", True),
    ]
    assert work.message.splitlines()[0].startswith(
        "2026-12-01 10:00-11:00 Dentist at Main St (uid "
    )
    assert work.metadata == {"provider": "caldav"}
    assert [e["summary"] for e in home.data["events"]] == ["Call"]
    assert (
        deleted.message.startswith("Deleted 2026-12-01 10:00-11:00 Dentist")
        and deleted.data["deleted"]
    )
    assert events_on_the_server(radicale, "Work") == ["Holiday"]


async def test_each_failure_is_a_clear_error(radicale: RadicaleServer, monkeypatch):
    with pytest.raises(ToolError, match="The calendar has no event with uid 'nope'") as no_event:
        await call("delete", uid="nope")
    with pytest.raises(
        ToolError, match="There is no calendar 'Travel'; the account has: 'Work', 'Home'"
    ) as no_calendar:
        await call("list", calendar="Travel")
    monkeypatch.setenv("CALENDAR_AGENT_PASSWORD", "wrong")
    with pytest.raises(
        ToolError, match="The CalDAV server refused the login of 'ada': Unauthorized"
    ) as bad_login:
        await call("list")
    monkeypatch.setenv("CALENDAR_AGENT_URL", f"http://127.0.0.1:{free_port()}/")
    with pytest.raises(ToolError, match="Could not reach the CalDAV server") as down:
        await call("list")
    monkeypatch.delenv("CALENDAR_AGENT_URL")
    with pytest.raises(ToolError, match="calendar_agent is not configured: url: Field required"):
        await call("list")

    assert {no_event.value.code, no_calendar.value.code} == {"not_found"}
    assert (bad_login.value.code, bad_login.value.recoverable) == ("bad_credentials", False)
    assert (down.value.code, down.value.recoverable) == ("server_unreachable", True)
    assert "wrong" not in str(bad_login.value)


async def test_a_calendar_outside_the_account_is_never_used(radicale: RadicaleServer, monkeypatch):
    monkeypatch.setenv("CALENDAR_AGENT_CALENDAR", f"{radicale.url}someone-else/work/")

    with pytest.raises(ToolError, match="There is no calendar") as refused:
        await call("list")

    assert refused.value.code == "not_found", "only the account's own calendars are found"


def test_orchestrator_run_takes_json_and_words_and_a_delete_asks(
    cli, radicale: RadicaleServer, tmp_path: Path
):
    approved_copy(cli, tmp_path, "personal_assistant_agent", "calendar_agent")
    path = "personal_assistant_agent/calendar_agent"

    created = cli(
        "run",
        path,
        "create",
        "--json",
        json.dumps({"summary": "Review", "start": "2026-12-04T15:00", "duration_minutes": 45}),
        cwd=tmp_path,
    )
    words = cli(
        "run",
        path,
        "create",
        "summary: Lunch with Bo, start: 2026-12-04T12:30, location: Cafe, Main St",
        cwd=tmp_path,
    )
    listed = cli("run", path, "list", "start: 2026-12-04, days: 1", cwd=tmp_path)
    uid = json.loads(created.stdout)["data"]["uid"]
    rejected = cli("run", path, "delete", f"uid: {uid}", cwd=tmp_path, stdin="n\n")
    deleted = cli(
        "run", path, "delete", "--json", json.dumps({"uid": uid}), cwd=tmp_path, stdin="y\n"
    )

    assert created.returncode == 0, created.stderr
    envelope = json.loads(created.stdout)
    assert envelope["data"]["end"] == "2026-12-04T15:45:00+01:00"
    assert (
        envelope["metadata"]["operation"] == "calendar_agent.create"
        and envelope["metadata"]["provider"] == "caldav"
    )
    assert words.returncode == 0, words.stderr
    assert words.stdout.startswith("Created 2026-12-04 12:30-13:30 Lunch with Bo at Cafe, Main St")
    assert listed.returncode == 0
    assert [line.split(" (uid")[0] for line in listed.stdout.splitlines()[:2]] == [
        "2026-12-04 12:30-13:30 Lunch with Bo at Cafe, Main St",
        "2026-12-04 15:00-15:45 Review",
    ]
    assert rejected.returncode == 1 and "calendar_agent_delete" in rejected.stderr
    assert deleted.returncode == 0, deleted.stderr
    assert events_on_the_server(radicale, "Work") == ["Lunch with Bo"]


# Issue 45: one timezone for every listed time, offsets stored as valid iCalendar; update, move,
# recurring events, attendees and one occurrence deleted.


def stored_calendars(server: RadicaleServer, calendar: str) -> list[icalendar.Calendar]:
    """Each event of `calendar` as the server keeps it, parsed back."""
    principal = caldav.DAVClient(url=server.url, username=USER, password=PASSWORD).principal()
    return [
        icalendar.Calendar.from_ical(e.data) for e in principal.calendar(name=calendar).events()
    ]


def assert_valid(stored: icalendar.Calendar) -> None:
    """Every TZID an event names has its VTIMEZONE in the same object (RFC 5545, 3.2.19)."""
    zones = {str(zone["TZID"]) for zone in stored.walk("VTIMEZONE")}
    named = {
        str(value.params["TZID"])
        for event in stored.walk("VEVENT")
        for values in event.values()
        for value in (values if isinstance(values, list) else [values])
        if hasattr(value, "params") and "TZID" in value.params
    }
    assert named <= zones, f"TZID {sorted(named - zones)} without a VTIMEZONE"
    for zone in named:
        ZoneInfo(zone)  # a real zone, not "+09:00"


def put_raw(server: RadicaleServer, calendar: str, ical: str) -> None:
    """An event as another client (Thunderbird, a phone) would have saved it."""
    principal = caldav.DAVClient(url=server.url, username=USER, password=PASSWORD).principal()
    principal.calendar(name=calendar).save_event(ical)


def zoned_event(uid: str, summary: str, zone: str, start: str, end: str, *, rrule: str = "") -> str:
    event = icalendar.Event()
    event.add("uid", uid)
    event.add("dtstamp", datetime(2026, 11, 1, tzinfo=UTC))
    event.add("summary", summary)
    event.add("dtstart", datetime.fromisoformat(start).replace(tzinfo=ZoneInfo(zone)))
    event.add("dtend", datetime.fromisoformat(end).replace(tzinfo=ZoneInfo(zone)))
    if rrule:
        event.add("rrule", icalendar.vRecur.from_ical(rrule))
    calendar = icalendar.Calendar()
    calendar.add("prodid", "-//another client//EN")
    calendar.add("version", "2.0")
    calendar.add_component(event)
    calendar.add_missing_timezones()
    return calendar.to_ical().decode()


@pytest.fixture
def machine_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Sets the machine's zone (TZ, as tzlocal reads it first); the real one again after."""

    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        tzlocal.reload_localzone()

    yield set_zone
    monkeypatch.undo()
    tzlocal.reload_localzone()


async def test_a_time_with_an_offset_is_stored_valid_and_listed_in_the_chosen_zone(
    radicale: RadicaleServer, monkeypatch
):
    created = await call("create", summary="Tokyo call", start="2026-12-01T09:00+09:00")
    paris = await call("list", start="2026-11-30", days=3)
    monkeypatch.setenv("CALENDAR_AGENT_TIMEZONE", "UTC")
    utc = await call("list", start="2026-11-30", days=3)

    [stored] = stored_calendars(radicale, "Work")
    assert_valid(stored)
    [event] = stored.events
    assert event.start == datetime(2026, 12, 1, 0, 0, tzinfo=UTC), "the same moment, in UTC"
    assert created.data["start"] == "2026-12-01T01:00:00+01:00"
    assert paris.message.splitlines() == [
        f"2026-12-01 01:00-02:00 Tokyo call (uid {created.data['uid']})",
        "Times in Europe/Paris.",
    ]
    assert paris.data["timezone"] == "Europe/Paris"
    assert paris.data["events"][0]["start"] == "2026-12-01T01:00:00+01:00"
    assert utc.message.splitlines()[0].startswith("2026-12-01 00:00-01:00 Tokyo call")
    assert utc.message.splitlines()[-1] == "Times in UTC."
    assert (utc.data["events"][0]["start"], utc.data["events"][0]["end"]) == (
        "2026-12-01T00:00:00+00:00",
        "2026-12-01T01:00:00+00:00",
    )


async def test_a_paris_event_and_a_new_york_series_list_in_one_zone(
    radicale: RadicaleServer, monkeypatch
):
    put_raw(
        radicale,
        "Work",
        zoned_event("p1", "Louvre", "Europe/Paris", "2026-12-01T18:00", "2026-12-01T19:00"),
    )
    put_raw(
        radicale,
        "Work",
        zoned_event(
            "ny1",
            "Standup",
            "America/New_York",
            "2026-11-30T09:00",
            "2026-11-30T09:15",
            rrule="FREQ=DAILY;COUNT=3",
        ),
    )
    monkeypatch.setenv("CALENDAR_AGENT_TIMEZONE", "Asia/Tokyo")

    listed = await call("list", start="2026-12-01", days=2)

    assert [line.split(" (uid")[0] for line in listed.message.splitlines()] == [
        "2026-12-01 23:00-23:15 Standup",
        "2026-12-02 02:00-03:00 Louvre",
        "2026-12-02 23:00-23:15 Standup",
        "Times in Asia/Tokyo.",
    ]
    assert [(e["summary"], e["start"]) for e in listed.data["events"]] == [
        ("Standup", "2026-12-01T23:00:00+09:00"),
        ("Louvre", "2026-12-02T02:00:00+09:00"),
        ("Standup", "2026-12-02T23:00:00+09:00"),
    ]
    assert [e["occurrence"] for e in listed.data["events"]] == [
        "2026-12-01T23:00:00+09:00",
        None,
        "2026-12-02T23:00:00+09:00",
    ]


async def test_the_zone_is_the_machines_unless_set_and_a_bad_one_is_a_configuration_error(
    radicale: RadicaleServer, monkeypatch, machine_zone
):
    monkeypatch.delenv("CALENDAR_AGENT_TIMEZONE")
    machine_zone("Asia/Tokyo")

    created = await call("create", summary="Sushi", start="2026-12-01T19:00")
    listed = await call("list", start="2026-12-01", days=1)
    monkeypatch.setenv("CALENDAR_AGENT_TIMEZONE", "Mars/Olympus_Mons")
    with pytest.raises(ToolError, match="'Mars/Olympus_Mons' is not an IANA zone") as bad:
        await call("list", start="2026-12-01", days=1)

    assert created.data["start"] == "2026-12-01T19:00:00+09:00"
    assert listed.message.splitlines()[-1] == "Times in Asia/Tokyo."
    assert (bad.value.code, bad.value.recoverable) == ("not_configured", False)
    assert "CALENDAR_AGENT_TIMEZONE" in str(bad.value)


async def test_a_recurring_event_with_attendees_and_one_occurrence_deleted(
    radicale: RadicaleServer,
):
    created = await call(
        "create",
        summary="Team sync",
        start="2026-12-01T09:00",
        duration_minutes=30,
        recurrence="FREQ=WEEKLY;COUNT=4",
        attendees=["Bo Li <bo@example.com>", "al@example.com"],
    )
    uid = created.data["uid"]
    before = await call("list", start="2026-12-01", days=28)
    second = before.data["events"][1]["occurrence"]
    deleted = await call("delete", uid=uid, occurrence=second)
    after = await call("list", start="2026-12-01", days=28)

    assert created.message == (
        f"Created 2026-12-01 09:00-09:30 Team sync with Bo Li, al@example.com (uid {uid}, repeats)"
        " on Work (times in Europe/Paris)."
    )
    assert created.data["recurrence"] == "FREQ=WEEKLY;COUNT=4"
    assert created.data["attendees"] == [
        {"email": "bo@example.com", "name": "Bo Li", "status": "NEEDS-ACTION"},
        {"email": "al@example.com", "name": None, "status": "NEEDS-ACTION"},
    ]
    assert [e["start"] for e in before.data["events"]] == [
        "2026-12-01T09:00:00+01:00",
        "2026-12-08T09:00:00+01:00",
        "2026-12-15T09:00:00+01:00",
        "2026-12-22T09:00:00+01:00",
    ]
    assert before.data["events"][0]["attendees"] == created.data["attendees"]
    assert second == "2026-12-08T09:00:00+01:00"
    assert deleted.message.startswith("Deleted the 2026-12-08T09:00:00+01:00 occurrence of")
    assert deleted.data["deleted_occurrence"] == second
    assert [e["start"][:10] for e in after.data["events"]] == [
        "2026-12-01",
        "2026-12-15",
        "2026-12-22",
    ]
    [stored] = stored_calendars(radicale, "Work")
    assert_valid(stored)
    [event] = stored.events
    assert [a.email for a in event.attendees] == ["bo@example.com", "al@example.com"]
    assert event.exdates == [datetime(2026, 12, 8, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))]


async def test_one_occurrence_of_an_all_day_series_is_deleted_by_its_day(radicale: RadicaleServer):
    created = await call(
        "create",
        summary="Gym",
        start="2026-12-01",
        all_day=True,
        recurrence="FREQ=DAILY;UNTIL=20261203",
    )
    await call("delete", uid=created.data["uid"], occurrence="2026-12-02")
    listed = await call("list", start="2026-12-01", days=7)

    assert [e["start"] for e in listed.data["events"]] == ["2026-12-01", "2026-12-03"]


async def test_update_changes_what_is_given_and_keeps_the_rest(radicale: RadicaleServer):
    created = await call(
        "create",
        summary="Dentist",
        start="2026-12-01T10:00",
        duration_minutes=45,
        location="Main St",
        description="Bring the card",
    )
    uid = created.data["uid"]
    updated = await call(
        "update",
        uid=uid,
        summary="Dentist (new time)",
        start="2026-12-01T14:00",
        location="",
        attendees=["ann@example.com"],
    )
    repeating = await call("update", uid=uid, recurrence="FREQ=DAILY;COUNT=2")
    once = await call("update", uid=uid, recurrence="none", end="2026-12-01T16:00")
    listed = await call("list", start="2026-12-01", days=3)

    assert updated.message == (
        f"Updated 2026-12-01 14:00-14:45 Dentist (new time) with ann@example.com (uid {uid}) on Work"
        " (times in Europe/Paris)."
    )
    assert updated.data["before"]["start"] == "2026-12-01T10:00:00+01:00"
    assert (updated.data["location"], updated.data["description"]) == (None, "Bring the card")
    assert repeating.data["recurrence"] == "FREQ=DAILY;COUNT=2"
    assert (once.data["recurrence"], once.data["end"]) == (None, "2026-12-01T16:00:00+01:00")
    assert [(e["summary"], e["start"], e["end"]) for e in listed.data["events"]] == [
        ("Dentist (new time)", "2026-12-01T14:00:00+01:00", "2026-12-01T16:00:00+01:00")
    ]
    [stored] = stored_calendars(radicale, "Work")
    assert_valid(stored)
    [event] = stored.events
    assert event.sequence == 3, "each change counted, as clients expect"


async def test_move_to_a_new_time_and_to_another_calendar(radicale: RadicaleServer):
    created = await call("create", summary="Review", start="2026-12-04T15:00", duration_minutes=45)
    uid = created.data["uid"]
    later = await call("move", uid=uid, start="2026-12-05T09:00+00:00")
    home = await call("move", uid=uid, to_calendar="Home")

    assert (later.data["start"], later.data["end"]) == (
        "2026-12-05T10:00:00+01:00",
        "2026-12-05T10:45:00+01:00",
    ), "the length kept, the offset's moment shown in the chosen zone"
    assert later.data["before"]["start"] == "2026-12-04T15:00:00+01:00"
    assert home.message.endswith("on Home (times in Europe/Paris).")
    assert (events_on_the_server(radicale, "Work"), events_on_the_server(radicale, "Home")) == (
        [],
        ["Review"],
    )
    [stored] = stored_calendars(radicale, "Home")
    assert_valid(stored)
    assert [e.uid for e in stored.events] == [uid], "the same event, not a copy under a new uid"


async def test_each_mistake_in_the_new_actions_is_a_clear_error(radicale: RadicaleServer):
    single = await call("create", summary="Once", start="2026-12-01T10:00")
    series = await call(
        "create", summary="Weekly", start="2026-12-01T10:00", recurrence="FREQ=WEEKLY;COUNT=2"
    )
    mistakes = {
        "a bad rule": (
            "create",
            {"summary": "X", "start": "2026-12-01T10:00", "recurrence": "FREQ=SOMETIMES"},
        ),
        "a bad attendee": (
            "create",
            {"summary": "X", "start": "2026-12-01T10:00", "attendees": ["bo at example"]},
        ),
        "nothing to change": ("update", {"uid": single.data["uid"]}),
        "end before start": ("update", {"uid": single.data["uid"], "end": "2026-12-01T09:00"}),
        "nowhere to move": ("move", {"uid": single.data["uid"]}),
        "not a series": ("delete", {"uid": single.data["uid"], "occurrence": "2026-12-01T10:00"}),
        "a day for a timed series": (
            "delete",
            {"uid": series.data["uid"], "occurrence": "2026-12-08"},
        ),
    }
    missing = {
        "no such event to update": ("update", {"uid": "nope", "summary": "X"}),
        "no such event to move": ("move", {"uid": "nope", "start": "2026-12-01T10:00"}),
        "no such calendar to move to": (
            "move",
            {"uid": single.data["uid"], "to_calendar": "Travel"},
        ),
        "no such occurrence": (
            "delete",
            {"uid": series.data["uid"], "occurrence": "2026-12-02T10:00"},
        ),
    }

    for what, (action, parameters) in mistakes.items():
        with pytest.raises(ToolError) as raised:
            await call(action, **parameters)
        assert (raised.value.code, raised.value.recoverable) == ("invalid_arguments", True), what
        assert raised.value.retry_strategy == "fix_arguments", what
    for what, (action, parameters) in missing.items():
        with pytest.raises(ToolError) as raised:
            await call(action, **parameters)
        assert (raised.value.code, raised.value.recoverable) == ("not_found", False), what
    assert events_on_the_server(radicale, "Work") == ["Once", "Weekly"], "nothing changed"
    assert len(stored_calendars(radicale, "Work")[1].events[0].exdates) == 0


@pytest.mark.parametrize(
    ("action", "parameters"),
    [
        ("update", {"uid": "u1", "summary": "X"}),
        ("move", {"uid": "u1", "start": "2026-12-01T10:00"}),
    ],
)
async def test_the_new_actions_say_a_bad_login_and_a_server_down(
    radicale: RadicaleServer, monkeypatch, action: str, parameters: dict[str, object]
):
    monkeypatch.setenv("CALENDAR_AGENT_PASSWORD", "wrong")
    with pytest.raises(ToolError) as bad_login:
        await call(action, **parameters)
    monkeypatch.setenv("CALENDAR_AGENT_URL", f"http://127.0.0.1:{free_port()}/")
    with pytest.raises(ToolError) as down:
        await call(action, **parameters)

    assert (bad_login.value.code, bad_login.value.recoverable) == ("bad_credentials", False)
    assert (down.value.code, down.value.recoverable) == ("server_unreachable", True)


@pytest.fixture
def shared_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RadicaleServer]:
    """Radicale where Work is the user's and Shared (holding a weekly series, uid s1) is only
    theirs to read, as a calendar shared with them read-only."""
    root = tmp_path / "radicale"
    with RadicaleServer(root) as setup:
        principal = caldav.DAVClient(url=setup.url, username=USER, password=PASSWORD).principal()
        principal.make_calendar(name="Work", cal_id="work")
        principal.make_calendar(name="Shared", cal_id="shared").save_event(
            zoned_event(
                "s1",
                "Board",
                "Europe/Paris",
                "2026-12-01T10:00",
                "2026-12-01T11:00",
                rrule="FREQ=WEEKLY;COUNT=3",
            )
        )
    with RadicaleServer(root, read_only="shared") as server:
        for name, value in {"URL": server.url, "USERNAME": USER, "PASSWORD": PASSWORD}.items():
            monkeypatch.setenv(f"CALENDAR_AGENT_{name}", value)
        monkeypatch.setenv("CALENDAR_AGENT_TIMEZONE", "Europe/Paris")
        yield server


async def test_a_read_only_calendar_refuses_each_change(shared_read_only: RadicaleServer):
    mine = await call("create", summary="Mine", start="2026-12-02T10:00", calendar="Work")
    changes = {
        "update": ("update", {"uid": "s1", "summary": "X", "calendar": "Shared"}),
        "move in time": ("move", {"uid": "s1", "start": "2026-12-01T12:00", "calendar": "Shared"}),
        "move into it": (
            "move",
            {"uid": mine.data["uid"], "to_calendar": "Shared", "calendar": "Work"},
        ),
        "move out of it": ("move", {"uid": "s1", "to_calendar": "Work", "calendar": "Shared"}),
        "delete one occurrence": (
            "delete",
            {"uid": "s1", "occurrence": "2026-12-08T10:00", "calendar": "Shared"},
        ),
    }

    for what, (action, parameters) in changes.items():
        with pytest.raises(
            ToolError, match="The CalDAV server refused access: Forbidden"
        ) as refused:
            await call(action, **parameters)
        assert (refused.value.code, refused.value.recoverable) == ("refused", False), what
    listed = await call("list", start="2026-12-01", days=14, calendar="Shared")
    assert [e["start"] for e in listed.data["events"]] == [
        "2026-12-01T10:00:00+01:00",
        "2026-12-08T10:00:00+01:00",
    ], "the series unchanged"
    assert events_on_the_server(shared_read_only, "Work") == ["Mine"], "kept where it was"


async def test_a_series_until_a_day_ends_on_that_day_in_the_chosen_zone(radicale: RadicaleServer):
    created = await call(
        "create",
        summary="Yoga",
        start="2026-12-01T19:00",
        recurrence="rrule:freq=weekly;until=20261215",
    )
    listed = await call("list", start="2026-12-01", days=28)

    [stored] = stored_calendars(radicale, "Work")
    assert stored.events[0].rrules[0]["UNTIL"] == [
        datetime(2026, 12, 15, 22, 59, 59, tzinfo=UTC)
    ], "RFC 5545: a timed series' UNTIL is in UTC; the day's end in Paris"
    assert created.data["recurrence"] == "FREQ=WEEKLY;UNTIL=20261215T225959Z"
    assert [e["start"][:10] for e in listed.data["events"]] == [
        "2026-12-01",
        "2026-12-08",
        "2026-12-15",
    ]


def test_orchestrator_run_updates_moves_and_deletes_one_occurrence(
    cli, radicale: RadicaleServer, tmp_path: Path
):
    approved_copy(cli, tmp_path, "personal_assistant_agent", "calendar_agent")
    path = "personal_assistant_agent/calendar_agent"

    created = cli(
        "run",
        path,
        "create",
        "summary: Standup, start: 2026-12-01T09:00, duration_minutes: 15, "
        "recurrence: FREQ=WEEKLY;BYDAY=TU,TH;COUNT=4",
        cwd=tmp_path,
    )
    uid = json.loads(
        cli("run", path, "list", "--json", '{"start": "2026-12-01"}', cwd=tmp_path).stdout
    )["data"]["events"][0]["uid"]
    updated = cli("run", path, "update", f"uid: {uid}, location: Room 4", cwd=tmp_path)
    moved = cli("run", path, "move", f"uid: {uid}, start: 2026-12-01T09:30", cwd=tmp_path)
    deleted = cli(
        "run",
        path,
        "delete",
        "--json",
        json.dumps({"uid": uid, "occurrence": "2026-12-03T09:30:00+01:00"}),
        cwd=tmp_path,
        stdin="y\n",
    )
    listed = cli("run", path, "list", "start: 2026-12-01, days: 14", cwd=tmp_path)

    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith(f"Created 2026-12-01 09:00-09:15 Standup (uid {uid}, repeats)")
    assert updated.returncode == 0 and "Standup at Room 4" in updated.stdout, updated.stderr
    assert moved.returncode == 0 and moved.stdout.startswith("Moved 2026-12-01 09:30-09:45"), (
        moved.stderr
    )
    assert deleted.returncode == 0, deleted.stderr
    assert [line[:22] for line in listed.stdout.splitlines()[:4]] == [
        "2026-12-01 09:30-09:45",
        "2026-12-08 09:30-09:45",
        "2026-12-10 09:30-09:45",
        "Times in Europe/Paris.",
    ]


async def test_a_series_moved_keeps_its_deleted_occurrence_deleted(radicale: RadicaleServer):
    created = await call(
        "create", summary="Sync", start="2026-12-01T09:00", recurrence="FREQ=DAILY;COUNT=3"
    )
    uid = created.data["uid"]
    await call("delete", uid=uid, occurrence="2026-12-02T09:00")
    await call("move", uid=uid, start="2026-12-01T10:30")
    listed = await call("list", start="2026-12-01", days=7)

    assert [e["start"] for e in listed.data["events"]] == [
        "2026-12-01T10:30:00+01:00",
        "2026-12-03T10:30:00+01:00",
    ]
