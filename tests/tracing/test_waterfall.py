"""A turn as a timeline in the terminal: `/trace`, `requests show --waterfall`, `requests list`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.store.timeline import TimelineRow
from orchestrator.terminal.waterfall import waterfall
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
MARKUP = re.compile(r"\[/?[a-z]+\]")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def plain(line: str) -> str:
    return MARKUP.sub("", line)


def test_parallel_calls_share_the_axis_and_nested_calls_sit_under_their_caller():
    rows = [
        TimelineRow("model", "gpt-4o", "m1", None, at(0), at(1), input_tokens=90, output_tokens=20),
        TimelineRow("tool", "weather.now", "t1", None, at(1), at(3), status="success"),
        TimelineRow("tool", "parrot.ask", "t2", None, at(1), at(4), status="success"),
        TimelineRow("model", "local-llm", "m2", "t2", at(1.5), at(2.5), cost_usd=0.0012),
        TimelineRow("tool", "echo.say", "t3", "t2", at(2.5), at(3), status="failure"),
        TimelineRow("model", "gpt-4o", "m3", None, at(4), at(5)),
    ]

    lines = [plain(line) for line in waterfall(rows, width=50)]

    labels = [line[:34].rstrip() for line in lines[1:]]
    assert labels == [
        "model gpt-4o", "tool weather.now", "tool parrot.ask", "  model local-llm",
        "  tool echo.say", "model gpt-4o",
    ]
    axis = 35  # where the bars begin: after the labels' column
    bars = {
        label: (line.index("█") - axis, line.rindex("█") - axis)
        for label, line in zip(labels, lines[1:], strict=True)
    }
    assert bars["tool weather.now"][0] == bars["tool parrot.ask"][0] == 10, "parallel: same start"
    assert bars["tool weather.now"][1] < bars["tool parrot.ask"][1]
    first, last = lines[1], lines[6]
    assert first.index("█") - axis == 0 and last.rindex("█") - axis == 49, "the axis spans the turn"
    assert "90+20 tokens" in lines[1] and "$0.0012" in lines[4] and "failure" in lines[5]
    assert lines[0].strip().endswith("5.00s")


def test_trace_in_chat_draws_the_last_turn_and_requests_list_and_show_find_it(cli, tmp_path: Path):
    script = [
        [("calculator", {"expression": "6*7"}), ("calculator", {"expression": "2+2"})],
        "42 and 4.",
    ]
    with OpenAICompatibleServer(script) as server:
        chat = cli("chat", "-s", "traced", cwd=tmp_path, stdin="work it out\n/trace\n",
                   env_extra=server_env(server))
    listed = cli("requests", "list", "--session", "traced", "--json", cwd=tmp_path)

    assert chat.returncode == 0, chat.stderr
    drawn = [plain(line) for line in chat.stdout.splitlines() if "█" in line]
    assert [line[:34].split()[0] for line in drawn].count("tool") == 2
    assert [line[:34].split()[0] for line in drawn].count("model") == 2
    requests = json.loads(listed.stdout)
    assert sorted(r["tool"] for r in requests) == ["calculator", "calculator"]
    shown = cli("requests", "show", requests[0]["request_id"], "--waterfall", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "tool calculator" in plain(shown.stdout)


def test_the_trace_and_the_request_log_name_a_tool_as_the_model_and_the_tasks_do(cli, tmp_path: Path):
    from tests.actions.test_run_command import approved_echo

    approved_echo(cli, tmp_path)
    ran = cli("run", "echo", "say", "--json", '{"text": "hi"}', cwd=tmp_path)
    request_id = json.loads(ran.stdout)["metadata"]["request_id"]

    drawn = cli("requests", "show", request_id, "--waterfall", cwd=tmp_path)
    shown = cli("requests", "show", request_id, cwd=tmp_path)
    listed = cli("requests", "list", cwd=tmp_path)

    assert drawn.returncode == 0, drawn.stderr
    assert "tool echo_say " in plain(drawn.stdout), drawn.stdout
    assert shown.stdout.startswith("echo_say completed (closed)"), shown.stdout
    [line] = [line for line in listed.stdout.splitlines() if line.startswith(request_id)]
    assert "  echo_say  completed  " in line and "echo.say" not in listed.stdout
