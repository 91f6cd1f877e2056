"""calendar_agent on Google Calendar (`CALENDAR_AGENT_PROVIDER=google`), against a local server
speaking Calendar API v3 as Google documents it: each action with the same answers as over
CalDAV, the OAuth2 token and its refresh, and each error code with whether it is retryable."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest, ToolResult
from tests.integrations.folders import free_port
from tests.integrations.google_calendar_server import (
    CLIENT_ID,
    CLIENT_SECRET,
    REFRESH_TOKEN,
    TOKEN,
    GoogleCalendarServer,
)
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "personal_assistant_agent" / "src" / "sub_graphs" / "calendar_agent"
PRIMARY, HOME = "ada@example.com", "home123@group.calendar.google.com"


@pytest.fixture
def google(monkeypatch: pytest.MonkeyPatch) -> Iterator[GoogleCalendarServer]:
    """The account's primary calendar and Home; the agent pointed at them with an access token."""
    with GoogleCalendarServer() as server:
        monkeypatch.delenv("CALENDAR_AGENT_URL", raising=False)
        for name, value in {
            "PROVIDER": "google",
            "GOOGLE_BASE_URL": server.base_url,
            "GOOGLE_TOKEN_URL": server.token_url,
            "GOOGLE_ACCESS_TOKEN": TOKEN,
            "TIMEZONE": "Europe/Paris",
        }.items():
            monkeypatch.setenv(f"CALENDAR_AGENT_{name}", value)
        yield server


@functools.cache
def agent() -> Tool:
    return load_tool_folder(FOLDER)


async def call(action: str, **parameters: object) -> ToolResult:
    request = ToolRequest(request_id="r1", action=action, parameters=parameters)  # type: ignore[arg-type]
    return await agent().execute(request)


async def failure(action: str, **parameters: object) -> ToolError:
    with pytest.raises(ToolError) as raised:
        await call(action, **parameters)
    return raised.value


def summaries(server: GoogleCalendarServer, calendar: str) -> list[str]:
    return sorted(e["summary"] for e in server.calendars[calendar].events.values())


async def test_create_list_and_delete_events(google: GoogleCalendarServer):
    dentist = await call("create", summary="Dentist", start="2026-12-01T10:00", location="Main St")
    holiday = await call("create", summary="Holiday", start="2026-12-02T00:00", all_day=True)
    call_ = await call(
        "create", summary="Call", start="2026-12-03T09:00Z", duration_minutes=30, calendar="Home"
    )
    work = await call("list", start="2026-12-01", days=3)
    home = await call("list", start="2026-12-01", days=7, calendar="home")
    deleted = await call("delete", uid=dentist.data["uid"])

    uid = dentist.data["uid"]
    assert dentist.message == (
        f"Created 2026-12-01 10:00-11:00 Dentist at Main St (uid {uid}) on {PRIMARY}"
        " (times in Europe/Paris)."
    )
    assert dentist.data["start"] == "2026-12-01T10:00:00+01:00"
    assert dentist.metadata == {"provider": "google"}
    assert (holiday.data["start"], holiday.data["end"], holiday.data["all_day"]) == (
        "2026-12-02",
        "2026-12-03",
        True,
    )
    assert call_.data["end"] == "2026-12-03T10:30:00+01:00", "shown in the configured zone"
    assert [(e["summary"], e["all_day"]) for e in work.data["events"]] == [
        ("Dentist", False),
        ("Holiday", True),
    ]
    assert work.message.splitlines() == [
        f"2026-12-01 10:00-11:00 Dentist at Main St (uid {uid})",
        f"2026-12-02 Holiday (uid {holiday.data['uid']})",
        "Times in Europe/Paris.",
    ]
    assert (work.data["calendar"], work.metadata) == (PRIMARY, {"provider": "google"})
    assert [e["summary"] for e in home.data["events"]] == ["Call"]
    assert deleted.message.startswith("Deleted 2026-12-01 10:00-11:00 Dentist")
    assert deleted.data["deleted"] is True
    assert summaries(google, PRIMARY) == ["Holiday"]
    stored = next(iter(google.calendars[HOME].events.values()))
    assert stored["start"] == {"dateTime": "2026-12-03T09:00:00+00:00", "timeZone": "UTC"}, (
        "an offset's moment stored in UTC"
    )
    listed = next(c for c in google.calls if c[1].endswith("/events") and c[0] == "GET")
    assert listed[2] | {"timeMin": "", "timeMax": ""} == {
        "timeMin": "",
        "timeMax": "",
        "singleEvents": "true",
        "orderBy": "startTime",
    }
    assert listed[2]["timeMin"] == "2026-12-01T00:00:00+01:00"


async def test_a_recurring_event_with_attendees_and_one_occurrence_deleted(
    google: GoogleCalendarServer,
):
    google.page_size = 2  # the four occurrences come in two pages
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
        f" on {PRIMARY} (times in Europe/Paris)."
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
    assert {e["uid"] for e in before.data["events"]} == {uid}, "the series' id, for update"
    assert before.data["events"][0]["recurrence"] == "FREQ=WEEKLY;COUNT=4"
    assert before.data["events"][0]["attendees"] == created.data["attendees"]
    assert second == "2026-12-08T09:00:00+01:00"
    assert deleted.message.startswith("Deleted the 2026-12-08T09:00:00+01:00 occurrence of")
    assert deleted.data["deleted_occurrence"] == second
    assert [e["start"][:10] for e in after.data["events"]] == [
        "2026-12-01",
        "2026-12-15",
        "2026-12-22",
    ]
    series = google.calendars[PRIMARY].events[uid]
    assert series["recurrence"] == ["RRULE:FREQ=WEEKLY;COUNT=4"]
    assert series["start"] == {"dateTime": "2026-12-01T09:00:00+01:00", "timeZone": "Europe/Paris"}
    assert google.calendars[PRIMARY].cancelled == {uid: {f"{uid}_20261208T080000Z"}}


async def test_one_occurrence_of_an_all_day_series_is_deleted_by_its_day(
    google: GoogleCalendarServer,
):
    created = await call(
        "create",
        summary="Gym",
        start="2026-12-01",
        all_day=True,
        recurrence="FREQ=DAILY;UNTIL=20261203",
    )
    deleted = await call("delete", uid=created.data["uid"], occurrence="2026-12-02")
    listed = await call("list", start="2026-12-01", days=7)

    assert deleted.data["deleted_occurrence"] == "2026-12-02"
    assert [e["start"] for e in listed.data["events"]] == ["2026-12-01", "2026-12-03"]


async def test_update_changes_what_is_given_and_keeps_the_rest(google: GoogleCalendarServer):
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
        f"Updated 2026-12-01 14:00-14:45 Dentist (new time) with ann@example.com (uid {uid}) on"
        f" {PRIMARY} (times in Europe/Paris)."
    )
    assert updated.data["before"]["start"] == "2026-12-01T10:00:00+01:00"
    assert (updated.data["location"], updated.data["description"]) == (None, "Bring the card")
    assert repeating.data["recurrence"] == "FREQ=DAILY;COUNT=2"
    assert (once.data["recurrence"], once.data["end"]) == (None, "2026-12-01T16:00:00+01:00")
    assert [(e["summary"], e["start"], e["end"]) for e in listed.data["events"]] == [
        ("Dentist (new time)", "2026-12-01T14:00:00+01:00", "2026-12-01T16:00:00+01:00")
    ]
    assert [c[0] for c in google.calls if c[1].endswith(uid)].count("PATCH") == 3


async def test_move_to_a_new_time_and_to_another_calendar(google: GoogleCalendarServer):
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
    assert home.data["uid"] == uid, "the same event (events.move), not a copy"
    assert (summaries(google, PRIMARY), summaries(google, HOME)) == ([], ["Review"])
    assert (
        "POST",
        f"/calendar/v3/calendars/{PRIMARY}/events/{uid}/move",
        {"destination": HOME},
    ) in google.calls


async def test_each_mistake_is_a_clear_error(google: GoogleCalendarServer):
    single = await call("create", summary="Once", start="2026-12-01T10:00")
    series = await call(
        "create", summary="Weekly", start="2026-12-01T10:00", recurrence="FREQ=WEEKLY;COUNT=2"
    )
    mistakes = {
        "end before start": ("update", {"uid": single.data["uid"], "end": "2026-12-01T09:00"}),
        "not a series": ("delete", {"uid": single.data["uid"], "occurrence": "2026-12-01T10:00"}),
        "a day for a timed series": (
            "delete",
            {"uid": series.data["uid"], "occurrence": "2026-12-08"},
        ),
    }
    missing = {
        "no such event to update": ("update", {"uid": "nope", "summary": "X"}),
        "no such event to move": ("move", {"uid": "nope", "start": "2026-12-01T10:00"}),
        "no such event to delete": ("delete", {"uid": "nope"}),
        "no such calendar": ("list", {"calendar": "Travel"}),
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
        error = await failure(action, **parameters)
        assert (error.code, error.retry_strategy) == ("invalid_arguments", "fix_arguments"), what
    for what, (action, parameters) in missing.items():
        error = await failure(action, **parameters)
        assert (error.code, error.recoverable) == ("not_found", False), what
    assert "The calendar has no event with uid 'nope'" in str(await failure("delete", uid="nope"))
    assert "There is no calendar 'Travel'; the account has: 'ada@example.com', 'Home'" in str(
        await failure("list", calendar="Travel")
    )
    assert summaries(google, PRIMARY) == ["Once", "Weekly"], "nothing changed"
    assert google.calendars[PRIMARY].cancelled == {}


async def test_an_event_deleted_twice_is_not_found(google: GoogleCalendarServer):
    created = await call("create", summary="Once", start="2026-12-01T10:00")
    uid = created.data["uid"]
    await call("delete", uid=uid)

    error = await failure("delete", uid=uid)

    assert (error.code, error.recoverable) == ("not_found", False), "Google's 410 deleted"


@pytest.mark.parametrize(
    ("status", "reason", "code", "retryable"),
    [
        (403, "rateLimitExceeded", "rate_limited", True),
        (403, "userRateLimitExceeded", "rate_limited", True),
        (403, "quotaExceeded", "rate_limited", True),
        (429, "rateLimitExceeded", "rate_limited", True),
        (403, "forbidden", "refused", False),
        (500, "backendError", "server_error", True),
        (503, "backendError", "server_error", True),
        (400, "invalid", "invalid_arguments", True),
    ],
)
async def test_each_google_error_is_its_code(
    google: GoogleCalendarServer, status: int, reason: str, code: str, retryable: bool
):
    google.next_failure = (status, reason)

    error = await failure("list", start="2026-12-01")

    assert (error.code, error.recoverable) == (code, retryable)
    assert f"({status} {reason})" in str(error)


@pytest.mark.parametrize(
    ("action", "parameters"),
    [
        ("create", {"summary": "X", "start": "2026-12-01T10:00"}),
        ("update", {"uid": "s1", "summary": "X"}),
        ("move", {"uid": "s1", "start": "2026-12-01T10:00"}),
        ("move", {"uid": "s1", "to_calendar": "Home", "calendar": "Shared"}),
        ("delete", {"uid": "s1"}),
        ("delete", {"uid": "s1", "occurrence": "2026-12-08T10:00"}),
    ],
)
async def test_a_read_only_calendar_refuses_each_change(
    google: GoogleCalendarServer, action: str, parameters: dict[str, object]
):
    shared = google.add_calendar("Shared", access_role="reader")
    google.calendars[shared].events["s1"] = {
        "id": "s1",
        "summary": "Board",
        "recurrence": ["RRULE:FREQ=WEEKLY;COUNT=3"],
        "start": {"dateTime": "2026-12-01T10:00:00+01:00", "timeZone": "Europe/Paris"},
        "end": {"dateTime": "2026-12-01T11:00:00+01:00", "timeZone": "Europe/Paris"},
    }

    error = await failure(action, **({"calendar": "Shared"} | parameters))

    assert (error.code, error.recoverable) == ("refused", False)
    assert "requiredAccessLevel" in str(error)
    assert list(google.calendars[shared].events) == ["s1"]
    assert google.calendars[shared].cancelled == {} and summaries(google, HOME) == []


async def test_a_bad_token_is_bad_credentials_and_never_shown(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN", "ya29.revoked")

    error = await failure("list")

    assert (error.code, error.recoverable) == ("bad_credentials", False)
    assert "(401 authError)" in str(error) and "CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN" in str(error)
    assert "ya29.revoked" not in str(error)


async def test_an_unreachable_server_is_retryable(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    down = f"http://127.0.0.1:{free_port()}/calendar/v3"
    monkeypatch.setenv("CALENDAR_AGENT_GOOGLE_BASE_URL", down)

    error = await failure("create", summary="X", start="2026-12-01T10:00")

    assert (error.code, error.recoverable) == ("server_unreachable", True)
    assert f"Could not reach Google Calendar at {down}" in str(error)


async def test_a_refresh_token_gets_the_access_token(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN")
    for name, value in {
        "REFRESH_TOKEN": REFRESH_TOKEN,
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
    }.items():
        monkeypatch.setenv(f"CALENDAR_AGENT_GOOGLE_{name}", value)

    created = await call("create", summary="Dentist", start="2026-12-01T10:00")

    assert created.data["summary"] == "Dentist"
    assert google.refreshed == 1, "one token for the whole action"


async def test_an_expired_access_token_is_refreshed_once(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN", "ya29.expired")
    for name, value in {
        "REFRESH_TOKEN": REFRESH_TOKEN,
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
    }.items():
        monkeypatch.setenv(f"CALENDAR_AGENT_GOOGLE_{name}", value)

    listed = await call("list", start="2026-12-01")

    assert listed.data["events"] == [] and google.refreshed == 1


async def test_a_revoked_refresh_token_is_bad_credentials(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN")
    for name, value in {
        "REFRESH_TOKEN": "1//revoked",
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
    }.items():
        monkeypatch.setenv(f"CALENDAR_AGENT_GOOGLE_{name}", value)

    error = await failure("list")

    assert (error.code, error.recoverable) == ("bad_credentials", False)
    assert "invalid_grant" in str(error) and "1//revoked" not in str(error)


async def test_no_token_is_not_configured_naming_the_variables_not_tool_config(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN")

    error = await failure("list")

    assert (error.code, error.recoverable) == ("not_configured", False)
    for variable in ("ACCESS_TOKEN", "REFRESH_TOKEN", "CLIENT_ID", "CLIENT_SECRET"):
        assert f"CALENDAR_AGENT_GOOGLE_{variable}" in str(error)
    assert "tool_config.yaml" not in str(error)
    assert google.calls == [], "nothing asked of Google without a token"


async def test_the_token_in_tool_config_is_never_read(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN")
    settings_model = agent().settings_model
    assert settings_model is not None

    settings = settings_model.load(
        {"provider": "google", "google_access_token": TOKEN}, tool="calendar_agent"
    )

    assert settings.google_access_token is None  # type: ignore[attr-defined]


async def test_the_token_in_the_folders_env_is_read(
    google: GoogleCalendarServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.delenv("CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN")
    folder = tmp_path / "calendar_agent"
    shutil.copytree(FOLDER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / ".env").write_text(f"CALENDAR_AGENT_GOOGLE_ACCESS_TOKEN={TOKEN}\n")

    request = ToolRequest(request_id="r1", action="list", parameters={"start": "2026-12-01"})
    listed = await load_tool_folder(folder).execute(request)

    assert (listed.data["calendar"], listed.metadata) == (PRIMARY, {"provider": "google"})
