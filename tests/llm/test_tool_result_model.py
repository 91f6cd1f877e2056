"""A cheaper model for the rounds after tool results: ORCHESTRATOR_TOOL_RESULT_MODEL, `llm: {tool_result_model}`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ConfigError
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools
from orchestrator.usage.prices import ModelPrice
from tests.helpers import run_cli
from tests.tool_folders import AGENT_TOOL, write_folder

CALL = [("calculator", {"expression": "6*7"})]


async def test_the_round_after_a_tool_result_goes_to_the_tool_result_model_and_is_counted_as_it():
    prices = {"main-model": ModelPrice(input=10.0, output=10.0), "cheap-model": ModelPrice(input=1.0, output=1.0)}
    with OpenAICompatibleServer([CALL, "42.", CALL, "Still 42."]) as server:
        settings = load_settings(
            model="openai:main-model",
            tool_result_model="openai:cheap-model",
            openai_base_url=server.base_url,
            model_prices=prices,
        )
        session = Orchestrator.create(settings, checkpointer=InMemorySaver()).session(user_id="u")
        first = await session.run("what is 6*7?")
        second = await session.run("and again?")

    assert (first.answer, second.answer) == ("42.", "Still 42.")
    # Each turn's first round is the main model's, the round after the tool result the cheaper one's.
    assert [r["model"] for r in server.requests] == ["main-model", "cheap-model"] * 2
    assert server.requests[1]["messages"][-1]["role"] == "tool"
    assert server.requests[1]["tools"], "the cheaper model is offered the tools too"
    for result in (first, second):
        used = result.usage.models
        assert set(used) == {"main-model", "cheap-model"}
        assert used["main-model"].calls == used["cheap-model"].calls == 1
        main, cheap = used["main-model"], used["cheap-model"]
        # Priced at each model's own price: ten times as much a token for the main model.
        assert main.cost_usd == pytest.approx(10 * main.tokens.total / 1e6)
        assert cheap.cost_usd == pytest.approx(cheap.tokens.total / 1e6)


def agent_folder(root: Path, name: str, **fields: object) -> None:
    config = {"name": name, "description": f"The {name} agent.", "version": "1.0", **fields}
    write_folder(root, name, config=config, code=AGENT_TOOL.format(name=name.title()))


async def test_a_folders_tool_result_model_answers_its_agents_rounds_after_tool_results(tmp_path: Path, scripted):
    root = tmp_path / "sub_graphs"
    with OpenAICompatibleServer(["The time is noon."]) as server:
        # `inherit`: the agent runs its parent's model, and its own cheaper one after tool results.
        agent_folder(root, "clock", llm={"tool_result_model": "openai:cheap-model"})
        agent_folder(root, "plain")
        settings = load_settings(
            sub_graphs_dir=root, data_dir=tmp_path / "data", openai_base_url=server.base_url,
            model_max_retries=0,
        )
        model = scripted(
            call_tools(("clock_ask", {"request": "what time is it?"})),
            call_tools(("current_time", {})),  # clock's first round: the parent's model
            call_tools(("plain_ask", {"request": "and you?"})),  # after clock's answer: the top's own
            call_tools(("current_time", {})),
            "plain: it is noon",  # plain inherits no tool_result_model: the parent's model
            "Both said noon.",
        )
        runtime = Orchestrator.create(settings, model=model, ask=lambda *_: True)
        result = await runtime.session(user_id="u").run("ask the clock")

    assert result.answer == "Both said noon."
    (request,) = server.requests
    assert request["model"] == "cheap-model"
    assert request["messages"][0]["content"].startswith("You are clock,")
    assert request["messages"][-1]["role"] == "tool"
    assert "cheap-model" in result.usage.models


def test_tool_result_model_is_taken_with_inherit_and_with_an_own_model():
    inherited = ToolConfig.model_validate(
        {"name": "x", "description": "d", "version": "1.0", "llm": {"tool_result_model": "openai:cheap"}}
    )
    own = ToolConfig.model_validate(
        {"name": "x", "description": "d", "version": "1.0",
         "llm": {"inherit": "local", "model": "openai:big", "tool_result_model": "openai:cheap"}}
    )

    assert not inherited.llm.local and inherited.llm.tool_result_model == "openai:cheap"
    assert own.llm.local and own.llm.tool_result_model == "openai:cheap"


async def test_a_tool_result_model_no_provider_knows_is_one_line_naming_its_setting():
    with OpenAICompatibleServer([CALL]) as server:
        settings = load_settings(
            model="openai:main-model", tool_result_model="nosuch:cheap", openai_base_url=server.base_url
        )
        with pytest.raises(ConfigError) as raised:
            await Orchestrator.create(settings).session(user_id="u").run("what is 6*7?")

    assert str(raised.value).startswith(
        "ORCHESTRATOR_TOOL_RESULT_MODEL='nosuch:cheap': `nosuch` is no provider LangChain knows"
    )


def test_tools_show_says_which_model_answers_after_tool_results_and_who_set_it(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    agent_folder(root, "top", llm={"tool_result_model": "openai:cheap-model"})
    write_folder(root, "top/src/sub_graphs/mid", config={
        "name": "mid", "description": "The mid agent.", "version": "1.0",
    }, code=AGENT_TOOL.format(name="Mid"))

    report = json.loads(run_cli("tools", "show", "mid", "--json", cwd=tmp_path).stdout)
    shown = run_cli("tools", "show", "mid", cwd=tmp_path).stdout

    assert report["model"]["tool_result_model"] == {"value": "openai:cheap-model", "origin": "top", "inherited": True}
    assert "after tool results: openai:cheap-model (inherited from top)" in shown


def test_a_folders_tool_result_model_no_provider_knows_skips_it_with_one_line_naming_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    root = tmp_path / "sub_graphs"
    agent_folder(root, "clock", llm={"tool_result_model": "nosuch:cheap"})
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")

    with caplog.at_level(logging.WARNING):
        runtime = Orchestrator.create(settings, model=ScriptedChatModel(), ask=lambda *_: True)

    assert "clock_ask" not in {tool.name for tool in runtime.tools}
    assert "llm.tool_result_model='nosuch:cheap': `nosuch` is no provider LangChain knows" in caplog.text
