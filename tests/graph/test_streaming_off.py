"""Streaming off: whole replies for servers that cannot stream (tool calls), at every level.

`ORCHESTRATOR_MODEL_STREAMING=0` turns it off for the orchestrator's model; an
agent folder's own model (`llm: {inherit: local, ..., streaming: false}`) for
that agent alone. The scripted server records each request's `stream` flag.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ToolConfigError
from orchestrator.folders.tool_config import load_tool_config
from orchestrator.llm.endpoints import model_endpoint
from orchestrator.llm.providers import build_chat_model
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import EventLog, run_cli, server_env
from tests.tool_folders import parrot_agent

SCRIPT = [[("calculator", {"expression": "6*7"})], "The answer is 42."]
STREAMING_OFF = {"ORCHESTRATOR_MODEL_STREAMING": "0"}


def streamed(server: OpenAICompatibleServer) -> list[bool]:
    return [bool(request.get("stream")) for request in server.requests]


def approve_all(folder: object, status: object) -> bool:
    return True


async def test_streaming_off_sends_whole_requests_and_a_tool_call_works():
    events = EventLog()
    with OpenAICompatibleServer(SCRIPT) as server:
        settings = load_settings(
            model="openai:test-model",
            openai_base_url=server.base_url,
            openai_api_key="test-key",
            model_streaming=False,
        )
        session = Orchestrator.create(settings, checkpointer=InMemorySaver()).session(user_id="u")
        result = await session.run("what is 6*7?", on_event=events)

    assert result.answer == "The answer is 42."
    assert [(c.name, c.status) for c in result.tool_calls] == [("calculator", "success")]
    assert [r.get("stream", False) for r in server.requests] == [False, False]
    answer = server.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and '"value": 42' in answer["content"]
    # The whole answer comes as one piece, and the turn's stages are still reported.
    assert [e["text"] for e in events if e["kind"] == "token"] == ["The answer is 42."]
    assert "executing" in events.stages() and events.stages()[-1] == "complete"


def test_the_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    server = {"model": "openai:m", "openai_base_url": "http://127.0.0.1:9/v1"}
    assert build_chat_model(load_settings(**server)).disable_streaming is False

    monkeypatch.setenv("ORCHESTRATOR_MODEL_STREAMING", "0")
    assert build_chat_model(load_settings(**server)).disable_streaming is True


@pytest.mark.parametrize(
    ("top_streaming", "agent_llm", "agent_streams"),
    [
        pytest.param(True, {"streaming": False}, False, id="agent-off-top-on"),
        pytest.param(False, {"streaming": True}, True, id="agent-on-top-off"),
        pytest.param(False, {}, False, id="agent-follows-the-setting"),
    ],
)
async def test_an_agent_streams_as_its_own_llm_says(
    tmp_path: Path, top_streaming: bool, agent_llm: dict[str, object], agent_streams: bool
):
    root = tmp_path / "sub_graphs"
    top_script = [[("parrot_ask", {"request": "say hi"})], "The parrot said hi."]
    agent_script = [[("echo_say", {"text": "hi"})], "It said: hi"]
    with (
        OpenAICompatibleServer(top_script) as top,
        OpenAICompatibleServer(agent_script) as agent,
    ):
        llm = {"inherit": "local", "model": "openai:agent-model", "base_url": agent.base_url}
        parrot_agent(root, llm={**llm, **agent_llm})
        settings = load_settings(
            model="openai:top-model",
            openai_base_url=top.base_url,
            openai_api_key="test-key",
            sub_graphs_dir=root,
            data_dir=tmp_path / "data",
            model_streaming=top_streaming,
        )
        runtime = Orchestrator.create(settings, checkpointer=InMemorySaver(), ask=approve_all)
        result = await runtime.session(user_id="u").run("make the parrot say hi")

    assert result.answer == "The parrot said hi."
    assert streamed(top) == [top_streaming, top_streaming]
    assert streamed(agent) == [agent_streams, agent_streams]
    echoed = agent.requests[1]["messages"][-1]
    assert echoed["role"] == "tool" and json.loads(echoed["content"])["message"] == "hi"


def test_streaming_is_an_option_of_an_own_model_only(tmp_path: Path):
    path = tmp_path / "tool_config.yaml"
    config = {"name": "x", "description": "X.", "version": "1", "llm": {"streaming": False}}
    path.write_text(yaml.safe_dump(config))

    with pytest.raises(ToolConfigError, match="`streaming` is used only with `inherit: local`"):
        load_tool_config(path)

    config["llm"] = {"inherit": "local", "model": "openai:own", "streaming": False}
    path.write_text(yaml.safe_dump(config))
    override = load_tool_config(path).llm
    assert model_endpoint(override, load_settings()).streaming is False


def test_tools_show_says_an_agent_does_not_stream(tmp_path: Path):
    llm = {"inherit": "local", "model": "openai:own", "base_url": "http://127.0.0.1:9/v1"}
    parrot_agent(tmp_path / "sub_graphs", llm={**llm, "streaming": False})
    assert run_cli("tools", "approve", "parrot", cwd=tmp_path).returncode == 0

    shown = run_cli("tools", "show", "parrot", cwd=tmp_path)
    as_json = run_cli("tools", "show", "parrot", "--json", cwd=tmp_path)

    assert "    streaming: off (whole replies)" in shown.stdout.splitlines()
    assert json.loads(as_json.stdout)["model"]["streaming"] is False


# --- the command: progress on stderr, each answer printed once, whole ---------------------


def test_ask_prints_a_whole_answer_once(cli, tmp_path: Path):
    with OpenAICompatibleServer(SCRIPT) as server:
        env = {**server_env(server), **STREAMING_OFF}
        done = cli("ask", "what is 6*7?", cwd=tmp_path, env_extra=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "The answer is 42.\n"
    assert "tool calculator (1/1): success" in done.stderr, "progress is still shown"
    assert streamed(server) == [False, False]


def test_piped_chat_prints_each_whole_answer_once(cli, tmp_path: Path):
    script = ["Hello Ada.", *SCRIPT]
    with OpenAICompatibleServer(script) as server:
        env = {**server_env(server), **STREAMING_OFF}
        done = cli("chat", cwd=tmp_path, stdin="My name is Ada.\nwhat is 6*7?\n", env_extra=env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Hello Ada.", "The answer is 42."]
    assert streamed(server) == [False, False, False]
