"""What the model reads of a result has the `run` envelope's metadata and details (issue 46, item 7).

A result says when it was made (and whose service answered) in its `metadata`;
a failure says what else is known in its `details`: the arguments that failed
validation, those the tool does not have, or what the tool raised with them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import BaseModel

from orchestrator.errors import ToolError
from orchestrator.sources.adapter import langchain_tools
from orchestrator.testing import call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.envelope import Envelope
from tests.helpers import make_session


class Days(BaseModel):
    days: int


class Weather(Tool):
    name: str = "weather"
    description: str = "Forecasts."

    @action(Days)
    async def forecast(self, params: Days, request: ToolRequest) -> ToolResult:
        """The forecast for a number of days."""
        if params.days > 7:
            raise ToolError("too far ahead", code="out_of_range", details={"max_days": 7})
        return request.result("Sunny.", data={"days": params.days}, metadata={"provider": "met"})


def read(text: str) -> dict[str, object]:
    return json.loads(text)


async def test_a_result_says_when_it_was_made_and_whose_service_answered(scripted):
    model = scripted(call_tools(("weather_forecast", {"days": 2})), "done")
    before = datetime.now(UTC).replace(microsecond=0)

    await make_session(model, langchain_tools(Weather())).run("weather?")

    text = model.received[1][-1].text
    body = read(text)
    assert text.startswith('{"status": "success", "metadata": '), "said before a cut can lose it"
    metadata = body["metadata"]
    assert isinstance(metadata, dict) and metadata["provider"] == "met"
    made = datetime.fromisoformat(str(metadata["timestamp"]))
    assert made.tzinfo is not None and before <= made <= datetime.now(UTC)
    assert body["data"] == {"days": 2}


async def test_a_failure_says_what_else_is_known_in_its_details(scripted):
    model = scripted(
        call_tools(("weather_forecast", {"days": "soon"})),
        call_tools(("weather_forecast", {"days": 2, "city": "Oslo"})),
        call_tools(("weather_forecast", {"days": 9})),
        "done",
    )

    await make_session(model, langchain_tools(Weather())).run("weather?")

    invalid, unknown, raised = (read(model.received[n][-1].text) for n in (1, 2, 3))
    assert invalid["error_code"] == "invalid_arguments"
    assert invalid["details"] == {
        "fields": {"days": "Input should be a valid integer, unable to parse string as an integer"}
    }
    assert unknown["details"] == {"unknown": ["city"], "known": ["days"]}
    assert raised["error_code"] == "out_of_range" and raised["details"] == {"max_days": 7}
    assert all("timestamp" in str(body["metadata"]) for body in (invalid, unknown, raised))


def test_the_run_envelope_has_the_same_details():
    result = ToolResult.from_error(ToolError("too far ahead", details={"max_days": 7}))
    started = datetime(2026, 11, 29, tzinfo=UTC)

    envelope = Envelope.of(result, tool="weather", action="forecast", started=started, duration_ms=1)

    assert envelope.error is not None
    assert envelope.error.details == {
        "max_days": 7,
        "recoverable": True,
        "retry_strategy": "retry_with_backoff",
    }


def test_a_result_keeps_the_time_it_was_made():
    made = ToolResult(message="Sunny.").stamped(datetime(2026, 11, 29, 10, 2, 11, tzinfo=UTC))

    again = made.stamped(datetime(2026, 11, 30, tzinfo=UTC))

    assert json.loads(again.model_text())["metadata"] == {"timestamp": "2026-11-29T10:02:11Z"}
