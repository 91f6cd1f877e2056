"""calendar_agent against a Radicale CalDAV server on 127.0.0.1 (the real caldav client)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path

import caldav
import pytest

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
        == f"Created 2026-12-01 10:00-11:00 Dentist at Main St (uid {dentist.data['uid']}) on Work."
    )
    assert dentist.data["start"] == "2026-12-01T10:00:00+01:00", (
        "a time without a zone is in the configured one"
    )
    assert (holiday.data["start"], holiday.data["end"]) == ("2026-12-02", "2026-12-03")
    assert call_.data["end"] == "2026-12-03T09:30:00+00:00"
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
