"""The events of requests as `requests show` prints them: status, time, a short detail."""

from __future__ import annotations

import json

from orchestrator.store.requests import RequestEvent
from orchestrator.terminal.text import one_line, shown

# Status words are the log's own; a detail (a question, a decision, edited
# arguments as JSON) is cut to one line of this many characters.
DETAIL_CHARS = 200
STATUS_WIDTH = 12


def event_line(event: RequestEvent) -> str:
    """`2025-01-02 12:04:31  edited        decision=edit args={"a": 1} edited_args={"a": 2}`.

    Rich markup; the detail (read as JSON when it is some) escaped and cut to one line.
    """
    when = event.at.astimezone().strftime("%Y-%m-%d %H:%M:%S") if event.at else "-" * 19
    line = f"[dim]{when}[/dim]  {shown(event.status).ljust(STATUS_WIDTH)}"
    if event.detail:
        line += f"  [dim]{shown(one_line(readable(event.detail), DETAIL_CHARS))}[/dim]"
    return line.rstrip()


def readable(detail: str) -> str:
    """A detail as a person reads it: JSON as `key=value` pairs, the questions of a pause in brief."""
    try:
        body = json.loads(detail)
    except json.JSONDecodeError:
        return detail
    if not isinstance(body, dict):
        return detail
    if isinstance(body.get("asked"), list):
        return "asked: " + " | ".join(_question(entry) for entry in body["asked"])
    pairs = (f"{key}={_value(value)}" for key, value in body.items() if value not in (None, ""))
    return " ".join(pairs)


def _question(entry: object) -> str:
    """`approval · files › mail · send {"to": "x"} (why: ...)` from a paused call's question."""
    question = entry.get("question") if isinstance(entry, dict) else None
    if not isinstance(question, dict) or not isinstance(question.get("action"), dict):
        return _value(entry)
    action = question["action"]
    path = " › ".join(str(name) for name in question.get("agent_path") or []) or "orchestrator"
    kind, name = question.get("kind", "?"), action.get("name", "?")
    text = f"{kind} · {path} · {name} {_value(action.get('args', {}))}"
    if question.get("risk_level"):
        text += f" (risk: {question['risk_level']}, urgency: {question.get('urgency', '?')})"
    return f"{text} (why: {question['why']})" if question.get("why") else text


def _value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
