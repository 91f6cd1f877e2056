"""Usage and cost: every model call counted once at every level, priced offline, and budgets."""

from __future__ import annotations

from pathlib import Path

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from sqlalchemy import text

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer, call_tools
from orchestrator.testing.openai_server import RawReply, Usage
from orchestrator.tools.results import ToolResult
from orchestrator.usage.budget import Budgets
from orchestrator.usage.prices import ModelIdentity, ModelPrice, PriceTable, is_local_url
from orchestrator.usage.tokens import TokenCount, tokens_of
from tests.helpers import make_session, run_cli, storage_for
from tests.tool_folders import AGENT_TOOL, write_folder

SERVED = "gpt-4o-mini-2024-07-18"


def reply(content: str | list[tuple[str, dict[str, object]]], **usage: int) -> RawReply:
    """A scripted server reply with its usage, as gpt-4o-mini reports it."""
    calls = [] if isinstance(content, str) else content
    from orchestrator.testing.openai_server import RawToolCall

    return RawReply(
        text=content if isinstance(content, str) else None,
        tool_calls=[RawToolCall.of(name, args) for name, args in calls],
        usage=Usage(**usage),
        model=SERVED,
    )


def server_settings(server: OpenAICompatibleServer, tmp_path: Path, **overrides: object):
    return load_settings(
        openai_base_url=server.base_url,
        openai_api_key="test",
        model="openai:gpt-4o-mini",
        model_max_retries=0,
        sub_graphs_dir=tmp_path / "sub_graphs",
        data_dir=tmp_path / "data",
        **overrides,
    )


def approve_all(folder: object, status: object) -> bool:
    return True


def table_price(prompt: int, completion: int, *, cached: int = 0) -> float:
    usage = PriceUsage(input_tokens=prompt, output_tokens=completion, cache_read_tokens=cached)
    return float(calc_price(usage, SERVED, provider_id="openai").total_price)


# --- tokens and prices ---------------------------------------------------------------------


def test_tokens_come_from_usage_metadata_with_cached_and_reasoning_details():
    usage = {
        "input_tokens": 120,
        "output_tokens": 40,
        "total_tokens": 160,
        "input_token_details": {"cache_read": 100},
        "output_token_details": {"reasoning": 30},
    }
    assert tokens_of(usage) == TokenCount(input=120, output=40, cached_input=100, reasoning=30)
    assert tokens_of(None) is None
    assert tokens_of({"input_tokens": None, "output_tokens": -3}) == TokenCount()


def test_the_bundled_table_prices_hosted_models_with_the_cached_input_discount():
    prices = PriceTable()
    openai = ModelIdentity(name="gpt-4o-mini", provider="openai")
    tokens = TokenCount(input=1_000_000, output=0, cached_input=500_000)
    cost = prices.cost(openai, tokens, model=SERVED)
    assert cost == pytest.approx(table_price(1_000_000, 0, cached=500_000))
    assert cost < prices.cost(openai, TokenCount(input=1_000_000), model=SERVED)


def test_local_and_unknown_models_have_no_price_unless_you_give_one():
    tokens = TokenCount(input=1000, output=1000)
    local = ModelIdentity(
        name="gpt-4o-mini", provider="openai", base_url="http://127.0.0.1:8080/v1"
    )
    assert PriceTable().cost(local, tokens) is None, (
        "a local server is not billed at OpenAI's price"
    )
    assert PriceTable(provider="openai").cost(local, tokens) == pytest.approx(
        table_price(1000, 1000)
    )
    unknown = ModelIdentity(name="no-such-model-xyz", provider="openai")
    assert PriceTable().cost(unknown, tokens) is None
    own = PriceTable({"qwen2.5:0.5b": ModelPrice(input=1, output=2, cached_input=0.5)})
    qwen = ModelIdentity(name="qwen2.5:0.5b", base_url="http://localhost:11434/v1")
    cost = own.cost(qwen, TokenCount(input=1_000_000, output=1_000_000, cached_input=1_000_000))
    assert cost == pytest.approx(0.5 + 2)


def test_which_servers_are_local():
    assert is_local_url("http://localhost:11434/v1") and is_local_url("http://10.0.0.5:8000/v1")
    assert is_local_url("http://[::1]:8000") and is_local_url("http://gpu-box.local:8000")
    assert not is_local_url("https://api.openai.com/v1") and not is_local_url(
        "https://openrouter.ai/api/v1"
    )


def test_a_budget_stops_once_reached_or_when_the_next_call_would_pass_it():
    budgets = Budgets(max_turn_cost_usd=0.10, max_session_cost_usd=1.0)
    assert budgets.check(turn=0.05, session=0.5) is None
    assert (
        budgets.check(turn=0.05, session=0.5, upcoming=0.06).budget
        == "ORCHESTRATOR_MAX_TURN_COST_USD"
    )
    assert budgets.check(turn=0.10, session=0.5).scope == "turn"
    stop = budgets.check(turn=0.0, session=1.0)
    assert (stop.scope, stop.spent_usd, stop.limit_usd) == ("session", 1.0, 1.0)
    assert "ORCHESTRATOR_MAX_SESSION_COST_USD" in stop.message and "$1.00" in stop.message


# --- a turn at two levels ------------------------------------------------------------------


async def test_a_two_level_turn_counts_each_model_call_once_and_prices_it(
    tmp_path: Path, database_url: str
):
    write_folder(tmp_path / "sub_graphs", "helper", code=AGENT_TOOL.format(name="Helper"))
    replies = [
        reply(
            [("helper_ask", {"request": "look it up"})], prompt_tokens=1000, completion_tokens=20
        ),
        reply("found it", prompt_tokens=300, completion_tokens=10, cached_tokens=200),
        reply("all done", prompt_tokens=1100, completion_tokens=30, reasoning_tokens=12),
    ]
    with OpenAICompatibleServer(replies) as server:
        settings = server_settings(server, tmp_path, price_provider="openai")
        async with storage_for(database_url, tmp_path) as storage:
            runtime = Orchestrator.create(settings, ask=approve_all, storage=storage)
            session = runtime.session(user_id="u-usage")
            result = await session.run("find it")
            async with storage.database.user_transaction("u-usage") as connection:
                rows = (
                    await connection.execute(
                        text(
                            "SELECT request_id, parent_request_id, name, input_tokens, "
                            "output_tokens, cached_input_tokens, reasoning_tokens, cost_usd "
                            "FROM request_usage WHERE session_id = :s AND kind = 'model' ORDER BY id"
                        ),
                        {"s": session.session_id},
                    )
                ).all()

    assert result.answer == "all done"
    assert all(r.get("stream_options") == {"include_usage": True} for r in server.requests)
    counted = result.usage.models[SERVED]
    assert counted.calls == 3, "each model call once: the orchestrator's two and the agent's one"
    assert counted.tokens == TokenCount(input=2400, output=60, cached_input=200, reasoning=12)
    expected = table_price(1000, 20) + table_price(300, 10, cached=200) + table_price(1100, 30)
    assert result.cost_usd == pytest.approx(expected)
    assert result.to_json()["cost_usd"] == pytest.approx(expected)
    assert result.to_json()["usage"]["tokens"]["input"] == 2400
    assert session.usage.session.tokens == counted.tokens
    assert [(r.input_tokens, r.output_tokens) for r in rows] == [(1000, 20), (300, 10), (1100, 30)]
    assert {r.name for r in rows} == {SERVED}
    agent_call = next(c for c in result.tool_calls if c.name == "helper_ask").request_id
    assert [r.parent_request_id for r in rows] == [None, agent_call, None]
    assert len({r.request_id for r in rows}) == 3
    assert sum(r.cost_usd for r in rows) == pytest.approx(expected)


async def test_an_unknown_model_shows_its_tokens_and_no_price(tmp_path: Path):
    with OpenAICompatibleServer(
        [RawReply(text="hi", usage=Usage(50, 5), model="my-local-llm")]
    ) as server:
        settings = server_settings(server, tmp_path)
        session = Orchestrator.create(settings, tools=[]).session(user_id="u")
        result = await session.run("hello")

    assert result.usage.models["my-local-llm"].tokens == TokenCount(input=50, output=5)
    assert result.cost_usd is None and result.to_json()["cost_usd"] is None
    assert result.usage.unpriced_models == ["my-local-llm"]
    assert result.to_json()["usage"]["models"]["my-local-llm"]["cost_usd"] is None


async def test_your_price_for_a_local_model_is_used(tmp_path: Path):
    with OpenAICompatibleServer(
        [RawReply(text="hi", usage=Usage(1000, 500), model="llama")]
    ) as server:
        prices = {"llama": ModelPrice(input=2.0, output=4.0)}
        session = Orchestrator.create(
            server_settings(server, tmp_path, model_prices=prices), tools=[]
        ).session(user_id="u")
        result = await session.run("hello")
    assert result.cost_usd == pytest.approx((1000 * 2.0 + 500 * 4.0) / 1_000_000)


# --- tool billing and budgets ----------------------------------------------------------------


@tool
async def paid(item: str) -> ToolResult:
    """Buy an item."""
    return ToolResult(message=f"bought {item}", billing={"total_cost_usd": 0.02, "credits": 3})


def priced_model(*steps: object, cost_per_call: float = 0.01) -> list[AIMessage]:
    """Scripted replies whose every call costs `cost_per_call` at the price the test sets."""
    tokens = int(cost_per_call * 1_000_000)  # at $1 per million input tokens
    usage = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
    messages = []
    for step in steps:
        message = step if isinstance(step, AIMessage) else AIMessage(content=str(step))
        messages.append(message.model_copy(update={"usage_metadata": usage}))
    return messages


PRICES = {"scripted": ModelPrice(input=1.0, output=1.0)}


async def test_tool_billing_is_summed_with_the_model_cost(scripted):
    model = scripted(
        *priced_model(call_tools(("paid", {"item": "a"}), ("paid", {"item": "b"})), "Bought.")
    )
    session = make_session(model, [paid], model_prices=PRICES)
    result = await session.run("buy two")

    assert result.usage.tools["paid"].calls == 2
    assert result.usage.tool_cost_usd == pytest.approx(0.04)
    assert result.usage.credits == 6
    assert result.usage.model_cost_usd == pytest.approx(0.02)
    assert result.cost_usd == pytest.approx(0.06)


async def test_a_turn_stops_at_its_budget_before_the_next_model_call(scripted):
    model = scripted(*priced_model(call_tools(("paid", {"item": "a"}))))
    session = make_session(model, [paid], model_prices=PRICES, max_turn_cost_usd=0.025)
    result = await session.run("buy things")

    # 0.01 (model) + 0.02 (tool) = 0.03 passed 0.025: no second model call.
    assert [c.status for c in result.tool_calls] == ["success"] and len(model.received) == 1
    assert result.budget_stop is not None and result.budget_stop.scope == "turn"
    assert "ORCHESTRATOR_MAX_TURN_COST_USD" in result.answer and "$0.03" in result.answer
    assert result.to_json()["budget_stop"]["limit_usd"] == 0.025
    assert result.cost_usd == pytest.approx(0.03)

    model.steps.extend(priced_model("A fresh turn."))
    assert (await session.run("and now?")).answer == "A fresh turn.", "the next turn runs"


async def test_calls_past_the_budget_are_answered_not_run_and_the_history_stays_valid(scripted):
    ran: list[str] = []

    @tool
    async def buy(item: str) -> str:
        """Buy an item."""
        ran.append(item)
        return "bought"

    # One model call of 0.03 passes the budget of 0.025: neither of its calls may run.
    model = scripted(
        *priced_model(
            call_tools(("buy", {"item": "a"}), ("buy", {"item": "b"})), cost_per_call=0.03
        )
    )
    session = make_session(model, [buy], model_prices=PRICES, max_turn_cost_usd=0.025)
    result = await session.run("buy things")

    assert ran == [] and [c.status for c in result.tool_calls] == ["failure", "failure"]
    history = await session.history()
    calls = [c["id"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls]
    answered = [m for m in history if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(m.tool_call_id for m in answered), "every call answered"
    assert all("budget_exceeded" in m.content for m in answered)
    assert isinstance(history[-1], AIMessage) and not history[-1].tool_calls
    assert "ORCHESTRATOR_MAX_TURN_COST_USD" in history[-1].text


async def test_a_session_budget_stops_the_next_turn_before_any_model_call(scripted):
    model = scripted(*priced_model("First."))
    session = make_session(model, [paid], model_prices=PRICES, max_session_cost_usd=0.01)
    assert (await session.run("one")).answer == "First."
    second = await session.run("two")

    assert second.budget_stop.scope == "session" and second.iterations == 1
    assert "ORCHESTRATOR_MAX_SESSION_COST_USD" in second.answer and "$0.01" in second.answer
    assert len(model.received) == 1, "no model call once the session's budget was reached"


async def test_a_call_whose_cap_would_pass_the_budget_does_not_start(scripted):
    ran: list[str] = []

    @tool
    async def costly() -> ToolResult:
        """Cost up to 50 cents."""
        ran.append("costly")
        return ToolResult(message="done")

    costly.metadata = {"max_cost_usd": 0.5}
    model = scripted(*priced_model(call_tools(("costly", {}))))
    session = make_session(model, [costly], model_prices=PRICES, max_turn_cost_usd=0.3)
    result = await session.run("go")

    assert ran == [] and result.tool_calls[0].status == "failure"
    assert result.budget_stop.scope == "turn"


async def test_a_call_billed_over_its_cap_stops_the_turn(scripted):
    @tool
    async def pricey() -> ToolResult:
        """Says it costs a dollar."""
        return ToolResult(message="done", billing={"total_cost_usd": 1.0})

    pricey.metadata = {"max_cost_usd": 0.1}
    model = scripted(*priced_model(call_tools(("pricey", {}))))
    result = await make_session(model, [pricey], model_prices=PRICES).run("go")

    assert result.tool_calls[0].status == "success"
    assert result.budget_stop.scope == "pricey" and "max_cost_usd" in result.answer
    assert "$1.00" in result.answer and len(model.received) == 1


SHOP_TOOL = '''
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Order(BaseModel):
    item: str


class Shop(Tool):
    @action(Order)
    async def buy(self, params: Order, request: ToolRequest) -> ToolResult:
        """Buy an item."""
        return request.result(f"bought {params.item}", billing={"total_cost_usd": 0.2, "credits": 2})
'''


async def test_a_folders_max_cost_usd_holds_its_calls_to_the_budget(tmp_path: Path, scripted):
    root = tmp_path / "sub_graphs"
    shop = {"name": "shop", "description": "A shop.", "version": "1", "max_cost_usd": 0.25}
    write_folder(root, "shop", config=shop, code=SHOP_TOOL)
    settings = load_settings(
        sub_graphs_dir=root, data_dir=tmp_path / "data", model_prices=PRICES, max_turn_cost_usd=0.4
    )
    model = scripted(
        *priced_model(
            call_tools(("shop_buy", {"item": "a"})),
            # 0.01 + 0.2 + 0.01 spent, and 0.25 more could pass 0.4: this call does not start.
            call_tools(("shop_buy", {"item": "b"})),
        )
    )
    runtime = Orchestrator.create(settings, model=model, ask=approve_all)
    result = await runtime.session(user_id="u").run("shop")

    assert [c.status for c in result.tool_calls] == ["success", "failure"]
    assert result.usage.tools["shop_buy"].cost_usd == pytest.approx(0.2)
    assert result.usage.tools["shop_buy"].credits == 2
    assert result.budget_stop.scope == "turn" and "$0.22" in result.answer
    shown = run_cli(
        "tools", "show", "shop", cwd=tmp_path, env={"ORCHESTRATOR_SUB_GRAPHS_DIR": str(root)}
    )
    assert "at most $0.25 a call" in shown.stdout
