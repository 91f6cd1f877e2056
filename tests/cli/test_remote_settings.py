"""The orchestrator's own level from a URL (ORCHESTRATOR_REMOTE_CONFIG_URL), over its settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli.common import settings_or_exit
from tests.helpers import run_cli
from tests.remote_config_server import ConfigServer, free_port

REMOTE = {"ORCHESTRATOR_MODEL": "openai:remote-model", "ORCHESTRATOR_MAX_TOOL_ITERATIONS": 9}


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The person's own settings: a model and a limit of their own, every copy fetched again."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the models are named, never called
    monkeypatch.setenv("ORCHESTRATOR_MODEL", "openai:local-model")
    monkeypatch.setenv("ORCHESTRATOR_MAX_TOOL_ITERATIONS", "3")
    monkeypatch.setenv("ORCHESTRATOR_REMOTE_CONFIG_REFRESH_SECONDS", "0")
    return monkeypatch


def test_the_orchestrators_level_runs_on_the_remote_copy_then_the_cached_one(local, capsys):
    with ConfigServer(REMOTE) as server:
        local.setenv("ORCHESTRATOR_REMOTE_CONFIG_URL", server.url)
        live = settings_or_exit()
        assert capsys.readouterr().err == f"orchestrator: configuration from {server.url} (remote)\n"
        assert settings_or_exit(max_tool_iterations=4).max_tool_iterations == 4, "a command's option wins"

    assert (live.model, live.max_tool_iterations) == ("openai:remote-model", 9)
    capsys.readouterr()
    gone = settings_or_exit()
    assert (gone.model, gone.max_tool_iterations) == ("openai:remote-model", 9)
    said = capsys.readouterr().err
    assert said.startswith(f"note: orchestrator: configuration from {server.url} (cached copy from ")
    assert "remote unreachable: ConnectError" in said

    with ConfigServer({"ORCHESTRATOR_MODEL": "openai:newer-model"}, port=server.port):
        back = settings_or_exit()
    assert (back.model, back.max_tool_iterations) == ("openai:newer-model", 3)


def test_with_no_copy_the_settings_alone_and_said(local, capsys):
    url = f"http://127.0.0.1:{free_port()}/config"
    local.setenv("ORCHESTRATOR_REMOTE_CONFIG_URL", url)

    settings = settings_or_exit()

    assert (settings.model, settings.max_tool_iterations) == ("openai:local-model", 3)
    assert capsys.readouterr().err.startswith(
        f"note: orchestrator: configuration from {url} (local file, remote unreachable and no cached copy: "
    )


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ({"OPENAI_BASE_URL": "https://elsewhere.example.com/v1"}, "the document sets OPENAI_BASE_URL, which only your own settings may set"),
        ({"ORCHESTRATOR_MAX_TURN_COST_USD": 100}, "the document sets ORCHESTRATOR_MAX_TURN_COST_USD, which only"),
        ({"ORCHESTRATOR_MAX_TOOL_ITERATIONS": 0}, "Invalid setting ORCHESTRATOR_MAX_TOOL_ITERATIONS=0"),
    ],
    ids=["endpoint", "budget", "invalid"],
)
def test_a_copy_that_sets_what_it_may_not_is_not_used(local, capsys, document, why):
    with ConfigServer({**REMOTE, **document}) as server:
        local.setenv("ORCHESTRATOR_REMOTE_CONFIG_URL", server.url)
        settings = settings_or_exit()

    assert (settings.model, settings.max_tool_iterations) == ("openai:local-model", 3)
    assert settings.openai_base_url is None and settings.max_turn_cost_usd is None
    assert why in capsys.readouterr().err


def test_the_url_is_https_but_to_this_machine(tmp_path: Path):
    done = run_cli("tools", "list", cwd=tmp_path, env={"ORCHESTRATOR_REMOTE_CONFIG_URL": "http://config.example.com/o.yaml"})

    assert done.returncode == 2
    assert done.stderr == (
        "error: Invalid setting ORCHESTRATOR_REMOTE_CONFIG_URL='http://config.example.com/o.yaml': "
        "must be an https:// URL (plain http:// only to 127.0.0.1, ::1 or localhost)\n"
    )


def test_a_copy_younger_than_the_refresh_is_used_unfetched(local):
    local.delenv("ORCHESTRATOR_REMOTE_CONFIG_REFRESH_SECONDS")  # the default: 300
    with ConfigServer(REMOTE) as server:
        local.setenv("ORCHESTRATOR_REMOTE_CONFIG_URL", server.url)
        assert settings_or_exit().remote_config_refresh_seconds == 300
        server.document = "ORCHESTRATOR_MODEL: openai:changed-model\n"
        again = settings_or_exit()
        assert server.requests == 1
    assert again.model == "openai:remote-model"
