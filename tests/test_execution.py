"""How tool calls run: timeouts, retries with backoff, failures that end no turn."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from orchestrator.errors import ToolError
from orchestrator.testing import call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools import policy as policy_module
from orchestrator.tools.adapter import langchain_tools
from orchestrator.tools.config import ToolConfig
from tests.helpers import EventLog, make_session


class Nothing(BaseModel):
    pass


class Flaky(Tool):
    """Fails `failures` times (recoverably unless told otherwise), then succeeds."""

    name: str = "flaky"
    description: str = "Flaky."
    failures: int = 0
    recoverable: bool = True
    calls: int = 0

    @action(Nothing)
    async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Try."""
        self.calls += 1
        if self.calls <= self.failures:
            raise ToolError(f"attempt {self.calls} failed", recoverable=self.recoverable)
        return request.result(f"worked on attempt {self.calls}")


class Stuck(Tool):
    name: str = "stuck"
    description: str = "Never finishes."

    @action(Nothing)
    async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Wait forever."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_module, "BACKOFF_BASE_SECONDS", 0.01)


def configured(tool: Tool, **policy: object):
    return langchain_tools(tool, config=ToolConfig(name=tool.name, description="x", version="1", **policy))


async def run(scripted, tools, name: str) -> tuple[dict[str, object], EventLog]:
    model = scripted(call_tools((name, {})), "ok")
    events = EventLog()
    await make_session(model, tools).run("go", on_event=events)
    return json.loads(model.received[1][-1].text), events


async def test_a_call_past_its_timeout_is_a_recoverable_error(scripted):
    body, _ = await run(scripted, configured(Stuck(), timeout_seconds=0.2), "stuck_go")
    assert body == {
        "type": "error",
        "status": "failure",
        "message": "stuck_go did not finish within 0.2s",
        "error_code": "timeout",
        "recoverable": True,
        "retry_strategy": "retry_with_backoff",
    }


async def test_recoverable_failures_are_retried_until_success(scripted):
    flaky = Flaky(failures=2)
    body, events = await run(scripted, configured(flaky, max_retries=2), "flaky_go")
    assert body == {"status": "success", "message": "worked on attempt 3"}
    assert flaky.calls == 3
    assert [phase for _, _, phase in events.tool_phases()] == [
        "starting", "validating", "executing", "completed"
    ]


async def test_retries_stop_at_max_retries(scripted):
    flaky = Flaky(failures=5)
    body, _ = await run(scripted, configured(flaky, max_retries=1), "flaky_go")
    assert body["message"] == "attempt 2 failed" and flaky.calls == 2


async def test_unrecoverable_failures_are_not_retried(scripted):
    flaky = Flaky(failures=1, recoverable=False)
    body, _ = await run(scripted, configured(flaky, max_retries=3), "flaky_go")
    assert body["recoverable"] is False and flaky.calls == 1
