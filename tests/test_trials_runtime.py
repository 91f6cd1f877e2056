"""Runtime breaks found by the trials (issue 27): unreported usage, file modes, contained
tool exits, redaction of the embedded server's passwords, embeddings drained at exit."""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import tool

from orchestrator.runtime import Runtime
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, RawToolCall
from orchestrator.usage.prices import ModelPrice

# --- 6. a streamed reply without usage is unknown, and budgets still hold -----------------


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"Notes on {topic}: " + "lorem ipsum " * 20


def no_usage_call(index: int) -> RawReply:
    return RawReply(tool_calls=[RawToolCall.of("lookup", {"topic": f"t{index}"})], usage=None)


async def test_a_stream_without_usage_is_unknown_and_the_turn_budget_still_stops_it(
    tmp_path: Path,
):
    replies = [no_usage_call(i) for i in range(41)]
    with OpenAICompatibleServer(replies) as server:
        settings = load_settings(
            openai_base_url=server.base_url,
            openai_api_key="test",
            model="openai:priced-llm",
            model_max_retries=0,
            max_tool_iterations=100,
            model_prices={"priced-llm": ModelPrice(input=2.0, output=2.0)},
            max_turn_cost_usd=0.02,
            sub_graphs_dir=tmp_path / "sub_graphs",
            data_dir=tmp_path / "data",
        )
        session = Runtime.create(settings, tools=[lookup]).session(user_id="u")
        result = await session.run("look everything up")

    assert all(r.get("stream_options") == {"include_usage": True} for r in server.requests)
    assert result.budget_stop is not None and result.budget_stop.scope == "turn"
    assert len(server.requests) < 41, "the budget stopped the calls"
    assert result.budget_stop.estimated_usd > 0
    assert "estimated" in result.answer and "did not report" in result.answer
    counted = result.usage.models["priced-llm"]
    assert counted.calls == len(server.requests) == counted.unreported_calls
    assert result.cost_usd is None, "an unreported usage is unknown, never $0"
    body = result.to_json()
    assert body["cost_usd"] is None
    assert body["usage"]["usage_unreported"] == ["priced-llm"]
    assert body["usage"]["models"]["priced-llm"]["cost_usd"] is None
