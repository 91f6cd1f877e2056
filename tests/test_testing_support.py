"""The helpers in orchestrator.testing, and the package's exports."""

from __future__ import annotations

import socket

import pytest

import orchestrator
import orchestrator.errors
from orchestrator.testing import RemoteConnectionBlocked, ScriptedChatModel, ScriptExhaustedError
from orchestrator.testing.openai_server import history_problem


def test_leftover_steps_fail_assert_complete():
    model = ScriptedChatModel(steps=["one", "two"])
    model.invoke("hi")
    with pytest.raises(AssertionError, match="1 scripted step"):
        model.assert_complete()


def test_calls_past_the_script_fail():
    model = ScriptedChatModel(steps=["only"])
    model.invoke("hi")
    model.assert_complete()
    with pytest.raises(ScriptExhaustedError):
        model.invoke("again")


def test_remote_connections_are_blocked_in_tests():
    with pytest.raises(RemoteConnectionBlocked):
        socket.create_connection(("203.0.113.1", 443), timeout=1)


def test_every_error_is_exported():
    errors = {
        name
        for name, value in vars(orchestrator.errors).items()
        if isinstance(value, type) and issubclass(value, orchestrator.errors.OrchestratorError)
    }
    assert errors <= set(orchestrator.errors.__all__)
    assert errors <= set(orchestrator.__all__)


def _history(*calls: dict[str, object], answers: list[str]) -> dict[str, object]:
    assistant = {"role": "assistant", "content": None, "tool_calls": list(calls)}
    tools = [{"role": "tool", "tool_call_id": i, "content": "{}"} for i in answers]
    return {"messages": [{"role": "user", "content": "hi"}, assistant, *tools]}


def _call(call_id: object, name: str = "calc", arguments: object = "{}") -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("request_body", "problem"),
    [
        (_history(_call("c1"), answers=[]), "did not have response messages: c1"),
        (_history(_call("c1"), answers=["c1", "c2"]), "must be a response to a preceding"),
        (_history(_call(""), answers=[""]), "expected a non-empty string"),
        (_history(_call(None), answers=[]), "expected a non-empty string"),
        (_history(_call("c1", name="a b"), answers=["c1"]), "does not match pattern"),
        (_history(_call("c1", arguments="[1]"), answers=["c1"]), "expected a JSON object"),
        (_history(_call("c1"), _call("c1"), answers=["c1", "c1"]), "Duplicate tool call id"),
    ],
)
def test_the_strict_server_refuses_what_openai_refuses(request_body, problem):
    assert history_problem(_history(_call("c1"), answers=["c1"])) is None
    assert problem in (history_problem(request_body) or "")
