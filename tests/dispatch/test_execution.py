"""How tool calls run: timeouts, retries with backoff, failures that end no turn.

Whatever a tool raises (SystemExit, KeyboardInterrupt, BaseException, its own
CancelledError) fails its call only, while a real cancellation still cancels
the turn. Blocking code runs off the event loop, and the timeout holds even for
a tool that blocks the loop or swallows its cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from pathlib import Path

import pytest

from orchestrator.dispatch import policy as policy_module
from orchestrator.errors import ToolError
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.sources.adapter import langchain_tools
from orchestrator.testing import call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from tests.dispatch.test_background import Nothing
from tests.helpers import EventLog, make_session, tool_json


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
    return tool_json(model.received[1][-1].text), events


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


class SlowOnce(Tool):
    """Its first run never ends; later runs answer at once. Counts its runs."""

    name: str = "slow"
    description: str = "Slow the first time."
    calls: int = 0

    @action(Nothing)
    async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Try."""
        self.calls += 1
        if self.calls == 1:
            await asyncio.Event().wait()
        return request.result(f"worked on attempt {self.calls}")


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_timed_out_call_is_run_again_only_when_idempotent(scripted, idempotent: bool):
    # The first run may still be going (a thread cannot be stopped) or have done its work.
    slow = SlowOnce()
    tools = configured(slow, timeout_seconds=0.1, max_retries=2, idempotent=idempotent)
    body, _ = await run(scripted, tools, "slow_go")
    if idempotent:
        assert body == {"status": "success", "message": "worked on attempt 2"} and slow.calls == 2
    else:
        assert body["error_code"] == "timeout" and slow.calls == 1


async def test_unrecoverable_failures_are_not_retried(scripted):
    flaky = Flaky(failures=1, recoverable=False)
    body, _ = await run(scripted, configured(flaky, max_retries=3), "flaky_go")
    assert body["recoverable"] is False and flaky.calls == 1


def raiser(error: BaseException, *, blocking: bool) -> Tool:
    """A tool whose one action (a plain def on a thread if `blocking`) raises `error`."""
    if blocking:

        class BlockingRaiser(Tool):
            @action(Nothing)
            def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
                """Raise, on a thread."""
                raise error

        return BlockingRaiser(name="raiser", description="Raises.")

    class Raiser(Tool):
        @action(Nothing)
        async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
            """Raise."""
            raise error

    return Raiser(name="raiser", description="Raises.")


HOSTILE = [SystemExit(3), BaseException("boom"), asyncio.CancelledError(), KeyboardInterrupt()]


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("error", HOSTILE, ids=lambda e: type(e).__name__)
async def test_a_tool_raising_base_exceptions_fails_only_its_call(scripted, error, blocking):
    name = "raiser_go"
    model = scripted(call_tools((name, {})), "It failed.")
    result = await make_session(model, langchain_tools(raiser(error, blocking=blocking))).run("go")

    assert result.answer == "It failed."
    assert [c.status for c in result.tool_calls] == ["failure"]
    body = json.loads(model.received[1][-1].text)
    assert body["message"].startswith(f"{name} failed: {type(error).__name__}")
    assert body["recoverable"] is False


async def test_a_real_cancellation_still_cancels_the_turn(scripted):
    entered = asyncio.Event()

    class Waiter(Tool):
        name: str = "waiter"
        description: str = "Waits."

        @action(Nothing)
        async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
            """Wait for ever."""
            entered.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    model = scripted(call_tools(("waiter_go", {})))
    turn = asyncio.ensure_future(make_session(model, langchain_tools(Waiter())).run("go"))
    await entered.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn


WAIT_STEPS = 2400  # polls of 50 ms: two minutes, far past any real wait


@pytest.fixture
def blocking(tmp_path: Path):
    """A tool whose actions block; what blocks for ever is released when the test ends."""
    started, gate, release = tmp_path / "started", tmp_path / "gate", threading.Event()

    class Blocking(Tool):
        name: str = "blocking"
        description: str = "Blocks."

        @action(Nothing)
        def until_gate(self, params: Nothing, request: ToolRequest) -> ToolResult:
            """Block this thread until the gate opens (two minutes at most)."""
            started.write_text("started")
            for _ in range(WAIT_STEPS):
                if gate.exists():
                    return request.result("the gate opened")
                time.sleep(0.05)
            return request.result("the gate never opened: the event loop was blocked")

        @action(Nothing)
        def forever(self, params: Nothing, request: ToolRequest) -> ToolResult:
            """Block until the test ends."""
            release.wait()
            return request.result("released")

    yield Blocking()
    release.set()


class LoopBlocker(Tool):
    name: str = "blocker"
    description: str = "Blocks the event loop."

    @action(Nothing)
    async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Async, yet blocking: three times its timeout, with no await."""
        time.sleep(0.3)
        return request.result("finished late")


async def test_a_blocking_action_leaves_the_event_loop_free(
    scripted, blocking: Tool, tmp_path: Path
):
    model = scripted(call_tools(("blocking_until_gate", {})), "Done.")
    session = make_session(model, configured(blocking, timeout_seconds=120))
    turn = asyncio.ensure_future(session.run("go"))
    # This coroutine runs on the same loop: it opens the gate only if the loop is free.
    while not (tmp_path / "started").exists():
        await asyncio.sleep(0.02)
    (tmp_path / "gate").write_text("open")
    await turn

    assert json.loads(model.received[1][-1].text)["message"] == "the gate opened"


async def test_a_blocking_action_stuck_for_ever_times_out(scripted, blocking: Tool):
    model = scripted(call_tools(("blocking_forever", {})), "It timed out.")
    await make_session(model, configured(blocking, timeout_seconds=0.1)).run("go")

    body = json.loads(model.received[1][-1].text)
    assert body["error_code"] == "timeout"
    assert body["message"] == "blocking_forever did not finish within 0.1s"


async def test_async_code_blocking_the_loop_past_its_timeout_fails(scripted):
    model = scripted(call_tools(("blocker_go", {})), "It timed out.")
    await make_session(model, configured(LoopBlocker(), timeout_seconds=0.1)).run("go")

    body = json.loads(model.received[1][-1].text)
    assert body["error_code"] == "timeout" and body["status"] == "failure"
    assert "the event loop was blocked" in body["message"]


class Deaf(Tool):
    name: str = "deaf"
    description: str = "Ignores cancellation."

    @action(Nothing)
    async def go(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Swallow the first cancellation, then finish."""
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return request.result("finished anyway")


async def test_a_tool_swallowing_its_cancellation_still_times_out(scripted):
    model = scripted(call_tools(("deaf_go", {})), "It timed out.")
    await make_session(model, configured(Deaf(), timeout_seconds=0.1)).run("go")

    assert json.loads(model.received[1][-1].text)["error_code"] == "timeout"
