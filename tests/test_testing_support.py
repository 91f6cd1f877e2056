"""The helpers in orchestrator.testing, and the package's exports."""

from __future__ import annotations

import socket

import pytest

import orchestrator
import orchestrator.errors
from orchestrator.testing import RemoteConnectionBlocked, ScriptedChatModel, ScriptExhaustedError


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
