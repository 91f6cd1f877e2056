"""Shared fixtures: no real model or network, a clean environment, scripted models."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrator.testing import ScriptedChatModel, block_remote_connections
from orchestrator.testing.scripted import Step


@pytest.fixture(autouse=True)
def no_real_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Block every non-local connection and hide the developer's model settings and `.env`."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ORCHESTRATOR_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    with block_remote_connections():
        yield


@pytest.fixture
def scripted() -> Iterator[Callable[..., ScriptedChatModel]]:
    """Make scripted models that must use their whole script by the end of the test."""
    made: list[ScriptedChatModel] = []

    def make(*steps: Step) -> ScriptedChatModel:
        model = ScriptedChatModel(steps=list(steps))
        made.append(model)
        return model

    yield make
    for model in made:
        model.assert_complete()
