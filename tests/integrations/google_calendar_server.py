"""A server on 127.0.0.1 speaking Google Calendar's REST API v3 as its reference describes it
(https://developers.google.com/calendar/api/v3/reference).

calendarList.list; events.list (timeMin, timeMax, singleEvents, orderBy=startTime, pageToken,
maxResults), get, insert, patch, delete, move and instances (originalStart); a series' RRULE
expanded into instances `{id}_{20261208T080000Z}` (`{id}_{20261208}` all day) with
`recurringEventId` and `originalStartTime`; deleting an instance cancels it. OAuth2: a bearer
token, and a token endpoint (POST /token, grant_type=refresh_token) that hands out new ones.

Failures are Google's error object `{"error": {"code", "message", "errors": [{"domain",
"reason", "message"}]}}` (https://developers.google.com/calendar/api/guides/errors): 401
authError, 403 requiredAccessLevel (a calendar shared read-only), 404 notFound, 410 deleted,
400 (a timed series without timeZone, an end before the start, orderBy without singleEvents).
A test makes the next call answer another (403 rateLimitExceeded, 429, 503 backendError).
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, tzinfo
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit
from zoneinfo import ZoneInfo

from dateutil.rrule import rrulestr

from tests.server_thread import ServedOnThread, send_json

TOKEN = "ya29.test-access-token"
REFRESH_TOKEN = "1//test-refresh-token"
CLIENT_ID = "test-client.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-test-secret"
PREFIX = "/calendar/v3"
Event = dict[str, Any]


class GoogleError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message

    def body(self) -> dict[str, object]:
        detail = {"domain": "global", "reason": self.reason, "message": self.message}
        return {"error": {"code": self.status, "message": self.message, "errors": [detail]}}


@dataclass
class Calendar:
    id: str
    summary: str
    primary: bool = False
    access_role: str = "owner"
    time_zone: str = "Europe/Paris"
    events: dict[str, Event] = field(default_factory=dict)
    cancelled: dict[str, set[str]] = field(default_factory=dict)  # series id: instance ids


class GoogleCalendarServer(ServedOnThread):
    """The account's calendars in `calendars` (by id); every API call in `calls` (method, path,
    query); `page_size` items a page unless `maxResults` says fewer."""

    def __init__(self) -> None:
        self.calendars = {
            "ada@example.com": Calendar("ada@example.com", "ada@example.com", primary=True),
            "home123@group.calendar.google.com": Calendar(
                "home123@group.calendar.google.com", "Home"
            ),
        }
        self.tokens = {TOKEN}
        self.calls: list[tuple[str, str, dict[str, str]]] = []
        self.refreshed = 0
        self.page_size = 250
        self.next_failure: tuple[int, str] | None = None
        self._deleted: set[str] = set()
        self._lock = threading.Lock()
        self._serve(ThreadingHTTPServer(("127.0.0.1", 0), self._handler()))

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{PREFIX}"

    @property
    def token_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/token"

    def add_calendar(self, summary: str, *, access_role: str = "owner") -> str:
        ident = f"{summary.lower()}@group.calendar.google.com"
        self.calendars[ident] = Calendar(ident, summary, access_role=access_role)
        return ident

    def put(self, calendar: str, event: Event) -> str:
        """An event as another client would have written it; its id."""
        return self._insert(self.calendars[calendar], dict(event))["id"]

    # -- the API ---------------------------------------------------------------------------

    def answer(
        self, method: str, path: str, query: dict[str, str], auth: str | None, body: object
    ) -> tuple[int, object]:
        if path == "/token":
            return self._token(query | (body if isinstance(body, dict) else {}))
        self.calls.append((method, unquote(path), query))
        try:
            if not path.startswith(PREFIX):
                raise GoogleError(404, "notFound", "Not Found")
            if auth is None or auth.removeprefix("Bearer ") not in self.tokens:
                raise GoogleError(401, "authError", "Invalid Credentials")
            if self.next_failure is not None:
                (status, reason), self.next_failure = self.next_failure, None
                raise GoogleError(status, reason, f"{reason} (as asked)")
            with self._lock:
                return self._route(method, path.removeprefix(PREFIX).split("/")[1:], query, body)
        except GoogleError as error:
            return error.status, error.body()

    def _route(
        self, method: str, parts: list[str], query: dict[str, str], body: object
    ) -> tuple[int, object]:
        parts = [unquote(part) for part in parts]
        if parts == ["users", "me", "calendarList"] and method == "GET":
            entries = [self._entry(c) for c in self.calendars.values()]
            return 200, self._paged("calendar#calendarList", entries, query)
        if len(parts) < 3 or parts[0] != "calendars" or parts[2] != "events":
            raise GoogleError(404, "notFound", "Not Found")
        calendar = self.calendars.get(parts[1])
        if calendar is None:
            raise GoogleError(404, "notFound", "Not Found")
        rest, change = parts[3:], method != "GET"
        if change and calendar.access_role not in ("owner", "writer"):
            raise GoogleError(
                403, "requiredAccessLevel", "You need to have writer access to this calendar."
            )
        if not rest:
            if method == "POST":
                return 200, self._insert(calendar, _json(body))
            return 200, self._paged("calendar#events", self._list(calendar, query), query)
        if len(rest) == 2 and rest[1] == "instances" and method == "GET":
            series = self._event(calendar, rest[0])
            found = [
                i
                for i in self._instances(calendar, series)
                if _same(i["originalStartTime"], query.get("originalStart"))
            ]
            return 200, self._paged("calendar#events", found, query)
        if len(rest) == 2 and rest[1] == "move" and method == "POST":
            return 200, self._move(calendar, rest[0], query.get("destination", ""))
        if len(rest) != 1:
            raise GoogleError(404, "notFound", "Not Found")
        ident = rest[0]
        if method == "GET":
            return 200, self._event(calendar, ident)
        if method == "PATCH":
            event = self._event(calendar, ident)
            if "recurringEventId" in event:
                raise GoogleError(400, "invalid", "Changing one instance is not served here")
            event = {**event, **_json(body)}
            _check(event)
            calendar.events[ident] = event | {
                "updated": _now(),
                "sequence": event.get("sequence", 0) + 1,
            }
            return 200, calendar.events[ident]
        if method == "DELETE":
            event = self._event(calendar, ident)
            if "recurringEventId" in event:
                calendar.cancelled.setdefault(event["recurringEventId"], set()).add(ident)
            else:
                del calendar.events[ident]
                self._deleted.add(ident)
            return 204, None
        raise GoogleError(404, "notFound", "Not Found")

    def _token(self, form: dict[str, str]) -> tuple[int, object]:
        if (form.get("client_id"), form.get("client_secret")) != (CLIENT_ID, CLIENT_SECRET):
            return 401, {
                "error": "invalid_client",
                "error_description": "The OAuth client was not found.",
            }
        if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != REFRESH_TOKEN:
            return 400, {
                "error": "invalid_grant",
                "error_description": "Token has been expired or revoked.",
            }
        self.refreshed += 1
        token = f"ya29.refreshed-{self.refreshed}"
        self.tokens.add(token)
        return 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}

    def _entry(self, calendar: Calendar) -> dict[str, object]:
        entry = {
            "kind": "calendar#calendarListEntry",
            "id": calendar.id,
            "summary": calendar.summary,
            "accessRole": calendar.access_role,
            "timeZone": calendar.time_zone,
        }
        return entry | ({"primary": True} if calendar.primary else {})

    def _paged(self, kind: str, items: list[Any], query: dict[str, str]) -> dict[str, object]:
        size = min(int(query.get("maxResults", self.page_size)), self.page_size)
        first = int(query.get("pageToken", "0"))
        page: dict[str, object] = {"kind": kind, "items": items[first : first + size]}
        if first + size < len(items):
            page["nextPageToken"] = str(first + size)
        return page

    def _insert(self, calendar: Calendar, event: Event) -> Event:
        event = {
            "kind": "calendar#event",
            "id": uuid.uuid4().hex,
            "status": "confirmed",
            "created": _now(),
            "updated": _now(),
            "sequence": 0,
            **event,
        }
        event.setdefault("iCalUID", f"{event['id']}@google.com")
        for attendee in event.get("attendees", []):
            attendee.setdefault("responseStatus", "needsAction")
        _check(event)
        calendar.events[event["id"]] = event
        return event

    def _event(self, calendar: Calendar, ident: str) -> Event:
        if ident in calendar.events:
            return calendar.events[ident]
        series, _, _ = ident.rpartition("_")
        if series in calendar.events:
            for instance in self._instances(calendar, calendar.events[series]):
                if instance["id"] == ident:
                    return instance
        if ident in self._deleted:
            raise GoogleError(410, "deleted", "Resource has been deleted")
        raise GoogleError(404, "notFound", "Not Found")

    def _list(self, calendar: Calendar, query: dict[str, str]) -> list[Event]:
        if query.get("orderBy") == "startTime" and query.get("singleEvents") != "true":
            raise GoogleError(
                400,
                "badRequest",
                "The requested ordering is not available for the particular query.",
            )
        low, high = (_bound(query.get(name)) for name in ("timeMin", "timeMax"))
        zone = ZoneInfo(calendar.time_zone)
        found: list[Event] = []
        for event in calendar.events.values():
            if query.get("singleEvents") == "true" and "recurrence" in event:
                found += self._instances(calendar, event)
            else:
                found.append(event)
        found = [
            e
            for e in found
            if (low is None or _moment(e["end"], zone) > low)
            and (high is None or _moment(e["start"], zone) < high)
        ]
        if query.get("orderBy") == "startTime":
            found.sort(key=lambda e: _moment(e["start"], zone))
        return found

    def _instances(self, calendar: Calendar, series: Event) -> list[Event]:
        start, end = _when(series["start"]), _when(series["end"])
        rule = next(line for line in series.get("recurrence", []) if line.startswith("RRULE:"))
        if isinstance(start, datetime):
            first = start.astimezone(ZoneInfo(series["start"]["timeZone"]))
        else:
            first = datetime.combine(start, time())
        gone = calendar.cancelled.get(series["id"], set())
        found = []
        for moment in islice(rrulestr(rule.removeprefix("RRULE:"), dtstart=first), 1000):
            timed = isinstance(start, datetime)
            original = moment if timed else moment.date()
            suffix = (
                moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
                if timed
                else moment.strftime("%Y%m%d")
            )
            ident = f"{series['id']}_{suffix}"
            if ident in gone:
                continue
            instance = {k: v for k, v in copy.deepcopy(series).items() if k != "recurrence"}
            zone = series["start"].get("timeZone")
            instance |= {
                "id": ident,
                "recurringEventId": series["id"],
                "originalStartTime": _time(original, zone),
                "start": _time(original, zone),
                "end": _time(original + (end - start), zone),
            }
            found.append(instance)
        return found

    def _move(self, calendar: Calendar, ident: str, destination: str) -> Event:
        target = self.calendars.get(destination)
        if target is None:
            raise GoogleError(404, "notFound", "Not Found")
        if target.access_role not in ("owner", "writer"):
            raise GoogleError(
                403, "requiredAccessLevel", "You need to have writer access to this calendar."
            )
        event = self._event(calendar, ident)
        target.events[ident] = calendar.events.pop(ident)
        return event

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                parts = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body: object = None
                if raw and "form-urlencoded" in (self.headers.get("Content-Type") or ""):
                    body = dict(parse_qsl(raw.decode()))
                elif raw:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = None
                status, answer = server.answer(
                    self.command,
                    parts.path,
                    dict(parse_qsl(parts.query)),
                    self.headers.get("Authorization"),
                    body,
                )
                send_json(self, status, answer)

            do_GET = do_POST = do_PATCH = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _json(body: object) -> Event:
    if not isinstance(body, dict):
        raise GoogleError(400, "parseError", "Parse Error")
    return body


def _check(event: Event) -> None:
    if "start" not in event or "end" not in event:
        raise GoogleError(400, "required", "Missing end time.")
    if (
        "recurrence" in event
        and "dateTime" in event["start"]
        and not event["start"].get("timeZone")
    ):
        raise GoogleError(400, "invalid", "Missing time zone definition for start time.")
    if event.get("recurrence") == []:
        del event["recurrence"]
    if _moment(event["end"], UTC) < _moment(event["start"], UTC):
        raise GoogleError(400, "timeRangeEmpty", "The specified time range is empty.")


def _when(value: dict[str, str]) -> date:
    return (
        date.fromisoformat(value["date"])
        if "date" in value
        else datetime.fromisoformat(value["dateTime"])
    )


def _time(value: date, zone: str | None) -> dict[str, str]:
    if not isinstance(value, datetime):
        return {"date": value.isoformat()}
    shown = value.astimezone(ZoneInfo(zone)) if zone else value
    return {"dateTime": shown.isoformat(), **({"timeZone": zone} if zone else {})}


def _moment(value: dict[str, str], zone: tzinfo) -> datetime:
    found = _when(value)
    if isinstance(found, datetime):
        return found
    return datetime.combine(found, time(), tzinfo=zone)


def _bound(text: str | None) -> datetime | None:
    if text is None:
        return None
    found = datetime.fromisoformat(text)
    if (
        found.tzinfo is None
    ):  # Google: "must be an RFC3339 timestamp with mandatory time zone offset"
        raise GoogleError(400, "badRequest", "Bad Request")
    return found


def _same(original: dict[str, str], given: str | None) -> bool:
    if given is None:
        return True
    if "date" in original:
        return original["date"] == given
    return "T" in given and datetime.fromisoformat(original["dateTime"]) == datetime.fromisoformat(
        given
    )


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")
