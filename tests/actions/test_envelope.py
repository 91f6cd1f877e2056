"""One envelope for every action's outcome; `execute()` takes the original design's plain dict."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.envelope import Envelope

STARTED = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_a_success_has_every_field_and_reads_as_lines():
    result = ToolResult(
        request_id="r1", message="Email sent.", data={"to": ["a@b.c"], "id": 7},
        metadata={"provider": "smtp"},
    )
    envelope = Envelope.of(result, tool="email_agent", action="send", started=STARTED, duration_ms=12.5)

    assert envelope.model_dump(mode="json") == {
        "success": True,
        "message": "Email sent.",
        "data": {"to": ["a@b.c"], "id": 7},
        "metadata": {
            "operation": "email_agent.send", "tool": "email_agent", "action": "send",
            "request_id": "r1", "timestamp": "2026-11-26T12:00:00+00:00", "duration_ms": 12.5,
            "provider": "smtp", "result_handle": None,
        },
        "error": None,
    }
    assert envelope.text() == "Email sent.\nto: a@b.c\nid: 7"


def test_a_failure_carries_its_code_message_and_details():
    result = ToolResult.from_error(ToolError("SMTP said no", code="smtp_error"))
    envelope = Envelope.of(result, tool="email_agent", action="send", started=STARTED, duration_ms=1)

    assert not envelope.success
    assert envelope.error is not None
    assert envelope.error.model_dump() == {
        "code": "smtp_error",
        "message": "SMTP said no",
        "details": {"recoverable": True, "retry_strategy": "retry_with_backoff"},
    }
    assert envelope.text() == "error (smtp_error): SMTP said no"


class Text(BaseModel):
    text: str


class Stamper(Tool):
    """Stamps text."""

    name: str = "stamper"
    description: str = "Stamps text."

    @action(Text)
    async def stamp(self, params: Text, request: ToolRequest) -> ToolResult:
        """Stamp it."""
        return request.result(f"[OK] {params.text}")


async def test_execute_takes_the_original_designs_plain_dict_and_its_result_reads_as_one():
    response = await Stamper().execute(
        {
            "request_id": "uuid-123",
            "parent_request_id": "uuid-456",
            "action": "stamp",
            "parameters": {"text": "hello"},
        }
    )

    assert response["status"] == "success" and response["message"] == "[OK] hello"
    assert (response["request_id"], response["parent_request_id"]) == ("uuid-123", "uuid-456")
    with pytest.raises(KeyError):
        response["no_such_field"]


async def test_a_plain_dict_without_an_id_gets_one_and_a_wrong_one_is_named():
    response = await Stamper().execute({"action": "stamp", "parameters": {"text": "x"}})
    assert response.request_id and len(response.request_id) == 32

    with pytest.raises(InvalidToolArgumentsError, match="Invalid request for stamper: .*action"):
        await Stamper().execute({"parameters": {"text": "x"}})
