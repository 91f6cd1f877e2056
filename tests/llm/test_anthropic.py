"""Anthropic's Messages API through langchain-anthropic (the `anthropic` extra), against a stand-in on 127.0.0.1."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ModelUnavailableError
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel, call_tools
from tests.anthropic_server import INPUT_TOKENS, AnthropicServer, FailsMidStream, Failure
from tests.helpers import EventLog
from tests.tool_folders import AGENT_TOOL, write_folder

MODEL = "anthropic:claude-stand-in"
SCRIPT = [[("calculator", {"expression": "6*7"})], "The answer is 42."]


@pytest.fixture
def anthropic_env(monkeypatch: pytest.MonkeyPatch):
    """Points langchain-anthropic at a stand-in: its own variables, as a user sets them."""

    def point(server: AnthropicServer) -> None:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-stand-in")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.delenv("ANTHROPIC_API_URL", raising=False)

    return point


def session_for(**settings: object):
    loaded = load_settings(**{"model": MODEL, "model_max_retries": 0, **settings})
    return Orchestrator.create(loaded, checkpointer=InMemorySaver()).session(user_id="u")


def assert_tool_round_trip(server: AnthropicServer) -> None:
    first, second = server.requests
    assert first["model"] == "claude-stand-in"
    assert "calculator" in {tool["name"] for tool in first["tools"]}
    assert "input_schema" in first["tools"][0]
    call, result = second["messages"][-2], second["messages"][-1]
    (use,) = [block for block in call["content"] if block["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("calculator", {"expression": "6*7"})
    (answer,) = result["content"]
    assert answer["type"] == "tool_result" and answer["tool_use_id"] == use["id"]
    assert json.loads(answer["content"])["data"]["value"] == 42
    assert server.keys == ["sk-ant-stand-in"] * 2


async def test_a_streamed_tool_call_then_streamed_text(anthropic_env):
    events = EventLog()
    with AnthropicServer(SCRIPT) as server:
        anthropic_env(server)
        result = await session_for().run("what is 6*7?", on_event=events)

    assert result.answer == "The answer is 42."
    assert [c.status for c in result.tool_calls] == ["success"]
    assert all(r.get("stream") is True for r in server.requests)
    tokens = [e["text"] for e in events if e["kind"] == "token"]
    assert len(tokens) > 1 and "".join(tokens) == "The answer is 42."
    assert_tool_round_trip(server)
    ((name, counted),) = result.usage.models.items()
    assert name == "claude-stand-in" and counted.calls == 2
    assert counted.tokens.input == 2 * INPUT_TOKENS and counted.tokens.output > 2
    assert counted.unreported_calls == 0


async def test_the_key_and_server_may_come_from_the_homes_dotenv(tmp_path: Path, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with AnthropicServer(["Hi."]) as server:
        (tmp_path / ".env").write_text(  # the home's, as OPENAI_API_KEY may be
            f"ANTHROPIC_API_KEY=sk-ant-from-dotenv\nANTHROPIC_BASE_URL={server.base_url}\n"
        )
        result = await session_for().run("hello")

    assert result.answer == "Hi."
    assert server.keys == ["sk-ant-from-dotenv"]


async def test_whole_replies_when_streaming_is_off(anthropic_env):
    with AnthropicServer(SCRIPT) as server:
        anthropic_env(server)
        result = await session_for(model_streaming=False).run("what is 6*7?")

    assert result.answer == "The answer is 42."
    assert not any(r.get("stream") for r in server.requests)
    assert_tool_round_trip(server)
    assert result.usage.models["claude-stand-in"].tokens.input == 2 * INPUT_TOKENS


async def test_calls_on_a_local_server_are_priced_only_when_said_whom_it_bills_like(anthropic_env):
    sonnet = "anthropic:claude-haiku-4-5"
    with AnthropicServer(["Hi.", "Hi."]) as server:
        anthropic_env(server)
        local = await session_for(model=sonnet).run("hello")
        billed = await session_for(model=sonnet, price_provider="anthropic").run("hello")

    assert local.usage.models["claude-haiku-4-5"].unpriced_calls == 1, "a local server: price unknown"
    counted = billed.usage.models["claude-haiku-4-5"]
    tokens = Usage(input_tokens=counted.tokens.input, output_tokens=counted.tokens.output)
    expected = calc_price(tokens, model_ref="claude-haiku-4-5", provider_id="anthropic").total_price
    assert counted.unpriced_calls == 0 and counted.cost_usd == pytest.approx(float(expected))


async def test_an_overloaded_server_is_asked_again_as_often_as_the_retries_say(anthropic_env):
    with AnthropicServer([Failure(529, "overloaded_error", "Overloaded"), "Hi."]) as server:
        anthropic_env(server)
        result = await session_for(model_max_retries=1).run("hello")

    assert result.answer == "Hi."
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (Failure(401, "authentication_error", "invalid x-api-key"), "rejected the API key (ANTHROPIC_API_KEY)."),
        (Failure(429, "rate_limit_error", "Number of requests has exceeded your rate limit"),
         "answered 429: Number of requests has exceeded your rate limit"),
        (Failure(529, "overloaded_error", "Overloaded"), "answered 529: Overloaded"),
    ],
)
async def test_an_error_status_is_one_line_naming_the_server(anthropic_env, failure: Failure, said: str):
    with AnthropicServer([failure]) as server:
        anthropic_env(server)
        with pytest.raises(ModelUnavailableError) as raised:
            await session_for().run("hello")

    assert str(raised.value) == f"The model server at {server.base_url} {said}"


async def test_an_error_event_mid_stream_is_one_line_with_its_type(anthropic_env):
    with AnthropicServer([FailsMidStream("The answer", Failure(529, "overloaded_error", "Overloaded"))]) as server:
        anthropic_env(server)
        with pytest.raises(ModelUnavailableError) as raised:
            await session_for().run("hello")

    assert str(raised.value) == (
        f"The model server at {server.base_url} reported an error mid-reply (overloaded_error): Overloaded"
    )


async def test_an_unreachable_server_names_anthropics_variable(anthropic_env):
    with AnthropicServer() as server:
        anthropic_env(server)  # closed on exit: nothing listens there any more
    with pytest.raises(ModelUnavailableError) as raised:
        await session_for().run("hello")

    assert str(raised.value).startswith(f"Cannot reach the model server at {server.base_url}: check ANTHROPIC_BASE_URL")


async def test_an_agent_folder_runs_its_own_anthropic_model(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CLOCK_ANTHROPIC_KEY", "sk-ant-folder")
    root = tmp_path / "sub_graphs"
    with AnthropicServer([[("current_time", {})], "It is noon."]) as server:
        llm = {"inherit": "local", "model": MODEL, "base_url": server.base_url, "api_key_env": "CLOCK_ANTHROPIC_KEY"}
        config = {"name": "clock", "description": "The clock agent.", "version": "1.0", "llm": llm}
        write_folder(root, "clock", config=config, code=AGENT_TOOL.format(name="Clock"))
        top = ScriptedChatModel(steps=[call_tools(("clock_ask", {"request": "time?"})), "Noon."])
        settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data", model_max_retries=0)
        runtime = Orchestrator.create(settings, model=top, ask=lambda *_: True)
        result = await runtime.session(user_id="u").run("what time is it?")

    assert result.answer == "Noon."
    assert server.keys == ["sk-ant-folder"] * 2
    assert server.requests[0]["system"].startswith("You are clock,")
    assert "claude-stand-in" in result.usage.models


@pytest.mark.process
def test_the_product_runs_without_the_extra_until_an_anthropic_model_is_asked_for():
    # A fresh interpreter in which neither package can be imported.
    script = (
        "import sys; sys.modules.update(anthropic=None, langchain_anthropic=None)\n"
        "from orchestrator.runtime import Orchestrator\n"
        "from orchestrator.settings import load_settings\n"
        "from orchestrator.errors import ConfigError\n"
        "Orchestrator.create(load_settings(model='offline'))\n"
        "try:\n"
        f"    Orchestrator.create(load_settings(model={MODEL!r}))\n"
        "except ConfigError as error:\n"
        "    print(error)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)

    assert ran.returncode == 0, ran.stderr
    (line,) = ran.stdout.splitlines()
    assert line.startswith(f"ORCHESTRATOR_MODEL={MODEL!r} needs the `anthropic` extra (langchain-anthropic): ")
    checkout = Path(__file__).resolve().parents[2]
    this_pip = f"{shlex.quote(sys.executable)} -m pip install"
    assert line.endswith(f"{this_pip} -e {shlex.quote(f'{checkout}[anthropic]')}"), "this Python's pip"
