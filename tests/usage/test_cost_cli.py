"""What the chat and `ask` show of usage: `/cost`, the quiet line after an answer, `ask --json`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from orchestrator.cli.cost import cost_table, turn_cost_line
from orchestrator.cli.repl import HELP, ChatRepl
from orchestrator.conversation.turns import TurnResult
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.terminal.signals import Interrupts
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools
from orchestrator.testing.openai_server import RawReply, Usage
from orchestrator.tools.results import Billing, ToolResult
from orchestrator.usage.meter import UsageMeter
from orchestrator.usage.prices import ModelPrice
from orchestrator.usage.tokens import TokenCount
from tests.helpers import server_env

PLAIN = {"force_terminal": False, "width": 200}
# $1 per million input tokens, $2 per million output tokens.
PRICES = {"scripted": ModelPrice(input=1.0, output=2.0)}
LOCAL_PRICES = json.dumps({"local-llm": {"input": 1.0, "output": 2.0}})


def rendered(meter: UsageMeter) -> str:
    console = Console(file=io.StringIO(), **PLAIN)
    console.print(cost_table(meter))
    return console.file.getvalue()  # type: ignore[attr-defined]


def row(text: str, first: str) -> list[str]:
    """The cells of the table row that starts with `first`."""
    [line] = [line for line in text.splitlines() if line.split()[:1] == [first]]
    return line.split()


def filled_meter() -> UsageMeter:
    meter = UsageMeter()
    hosted = TokenCount(input=12_000, output=340, cached_input=2_000, reasoning=12)
    meter.add_model("gpt-4o-mini", hosted, 0.0015, seconds=2.0)
    meter.add_model("gpt-4o-mini", TokenCount(input=1_000, output=10), 0.0005, seconds=1.0)
    meter.add_model("my-local-llm", TokenCount(input=50, output=5), None, seconds=0.5)
    meter.add_tool("search_web", Billing(total_cost_usd=0.02, credits=3))
    meter.add_tool("search_web", Billing(total_cost_usd=0.01))
    meter.add_tool("calculator", None)
    return meter


# --- /cost and the turn line, rendered from totals --------------------------------------------


def test_tool_calls_without_a_cost_are_named_a_few_at_most():
    meter = filled_meter()
    meter.add_tool("calculator", None)
    for number in range(5):
        meter.add_tool(f"tool_{number}", None)

    text = rendered(meter)

    assert "7 other tool calls (calculator ×2, tool_0, tool_1, tool_2, tool_3, …): no cost reported" in text


def test_cost_shows_tokens_by_model_tool_costs_and_the_total():
    text = rendered(filled_meter())

    assert row(text, "gpt-4o-mini") == [
        "gpt-4o-mini",
        "2",
        "13,000",
        "2,000",
        "350",
        "12",
        "$0.002",
    ]
    unknown = ["my-local-llm", "1", "50", "0", "5", "0", "price", "unknown"]
    assert row(text, "my-local-llm") == unknown
    assert row(text, "search_web") == ["search_web", "2", "$0.03", "3"], "calls, cost, credits"
    assert "1 other tool call (calculator): no cost reported" in text
    [total] = [line for line in text.splitlines() if line.startswith("total")]
    assert total == (
        "total  $0.032 (models $0.002, tools $0.03, 3 credits), and price unknown for my-local-llm"
    )
    assert "in this process" in text and "3.5s in the session's model calls" in text


def test_cost_of_a_fully_priced_session_has_no_unknown_price():
    meter = UsageMeter()
    meter.add_model("gpt-4o-mini", TokenCount(input=100, output=10), 0.25, seconds=0.1)
    text = rendered(meter)

    assert "price unknown" not in text and "tools" not in text.split("total")[0]
    assert "total  $0.25 (models $0.25, tools $0.00)" in text


def test_cost_of_a_session_without_calls_says_so():
    text = rendered(UsageMeter())
    assert "No model or tool calls in this session yet." in text
    assert "$" not in text


def turn(meter: UsageMeter) -> TurnResult:
    return TurnResult(answer="ok", answer_id="m1", iterations=1, usage=meter.turn)


def test_the_turn_line_gives_tokens_and_cost_when_the_price_is_known():
    meter = UsageMeter()
    meter.add_model("gpt-4o-mini", TokenCount(input=1_234, output=56), 0.0012, seconds=1.0)
    assert turn_cost_line(turn(meter)) == "turn: 1,234 tokens in · 56 out · $0.0012"

    cached = TokenCount(input=100, cached_input=80, reasoning=4)
    meter.add_model("gpt-4o-mini", cached, 0.0, seconds=0)
    meter.add_tool("search_web", Billing(total_cost_usd=0.02, credits=3))
    assert turn_cost_line(turn(meter)) == (
        "turn: 1,334 tokens in (80 cached) · 56 out (4 reasoning) · $0.0212 (tools $0.02)"
        " · 3 credits"
    )


def test_no_turn_line_when_a_price_is_unknown_or_nothing_was_counted():
    unpriced = UsageMeter()
    unpriced.add_model("gpt-4o-mini", TokenCount(input=10, output=1), 0.001, seconds=0)
    unpriced.add_model("my-local-llm", TokenCount(input=10, output=1), None, seconds=0)
    assert turn_cost_line(turn(unpriced)) is None, "part of the cost is unknown: /cost tells"
    assert turn_cost_line(turn(UsageMeter())) is None
    unbilled = UsageMeter()
    unbilled.add_tool("calculator", None)
    assert turn_cost_line(turn(unbilled)) is None


# --- the chat: /cost and the line after each answer -------------------------------------------


class NoLines:
    """No typed lines: the test drives the REPL through `turn` and `command`."""

    async def readline(self) -> str | None:
        return None


def with_usage(*steps: str | AIMessage, tokens: int = 1_000) -> list[AIMessage]:
    """Scripted replies that report `tokens` input tokens and a tenth of that as output."""
    output = tokens // 10
    usage = {"input_tokens": tokens, "output_tokens": output, "total_tokens": tokens + output}
    replies = [step if isinstance(step, AIMessage) else AIMessage(content=step) for step in steps]
    return [reply.model_copy(update={"usage_metadata": usage}) for reply in replies]


def chat(
    model: ScriptedChatModel,
    tools: list[BaseTool] | None = None,
    *,
    terminal: bool = False,
    **settings: object,
) -> tuple[ChatRepl, io.StringIO, io.StringIO]:
    app = Orchestrator.create(
        load_settings(**settings), model=model, tools=tools or [], checkpointer=InMemorySaver()
    )
    out, err = io.StringIO(), io.StringIO()
    # A terminal without colours: what is printed is the text alone.
    out_console = Console(file=out, width=200, force_terminal=terminal, color_system=None)
    repl = ChatRepl(
        runtime=app,
        session=app.session(user_id="u"),
        lines=NoLines(),
        interrupts=Interrupts(),
        out=out_console,
        err=Console(file=err, **PLAIN),
    )
    return repl, out, err


LINE = "turn: 1,000 tokens in · 100 out · $0.0012"  # 1,000 x $1 + 100 x $2 per million


async def test_piped_chat_prints_the_turn_line_on_stderr_and_the_answer_alone(scripted):
    repl, out, err = chat(scripted(*with_usage("Hello.")), model_prices=PRICES)
    await repl.turn("hi")

    assert out.getvalue() == "Hello.\n", "standard output stays the answers alone"
    assert LINE in err.getvalue().splitlines()


async def test_on_a_terminal_the_turn_line_follows_the_answer(scripted):
    repl, out, _ = chat(scripted(*with_usage("Hello.")), terminal=True, model_prices=PRICES)
    await repl.turn("hi")

    assert out.getvalue().splitlines() == ["Hello.", LINE]


async def test_an_unknown_price_prints_no_turn_line_and_cost_says_price_unknown(scripted):
    repl, out, err = chat(scripted(*with_usage("Hello.", "Again.")))
    await repl.turn("hi")
    await repl.turn("again")
    await repl.command("/cost")

    assert "turn:" not in out.getvalue() + err.getvalue()
    text = out.getvalue()
    assert text.startswith("Hello.\nAgain.\n")
    assert row(text, "scripted") == ["scripted", "2", "2,000", "0", "200", "0", "price", "unknown"]
    assert "price unknown for scripted" in text


async def test_cost_in_the_chat_sums_the_session_turns(scripted):
    @tool
    async def lookup(query: str) -> ToolResult:
        """Look something up."""
        return ToolResult(message="found", billing={"total_cost_usd": 0.05, "credits": 2})

    steps = with_usage(call_tools(("lookup", {"query": "q"})), "Found it.", "Bye.")
    repl, out, err = chat(scripted(*steps), [lookup], model_prices=PRICES)
    await repl.turn("find q")
    await repl.turn("thanks")
    await repl.command("/cost")
    await repl.command("/help")

    lines = err.getvalue().splitlines()
    assert "turn: 2,000 tokens in · 200 out · $0.0524 (tools $0.05) · 2 credits" in lines
    assert LINE in lines, "the second turn counts alone"
    text = out.getvalue()
    assert row(text, "scripted") == ["scripted", "3", "3,000", "0", "300", "0", "$0.0036"]
    assert row(text, "lookup") == ["lookup", "1", "$0.05", "2"]
    assert "total  $0.0536 (models $0.0036, tools $0.05, 2 credits)" in text
    assert "/cost" in HELP and "/cost" in text


async def test_a_budget_stop_is_the_answer_the_chat_shows(scripted):
    @tool
    async def buy(item: str) -> ToolResult:
        """Buy an item."""
        return ToolResult(message=f"bought {item}", billing={"total_cost_usd": 0.02})

    steps = with_usage(call_tools(("buy", {"item": "a"})))
    repl, out, err = chat(scripted(*steps), [buy], model_prices=PRICES, max_turn_cost_usd=0.015)
    await repl.turn("buy things")

    [answer] = out.getvalue().splitlines()
    assert answer.startswith("Stopped before passing the turn budget of $0.015")
    assert "ORCHESTRATOR_MAX_TURN_COST_USD" in answer
    assert "turn: 1,000 tokens in · 100 out · $0.0212 (tools $0.02)" in err.getvalue()
    assert repl.failed_turns == 0


# --- ask, end to end ------------------------------------------------------------------------


def priced_env(server: OpenAICompatibleServer) -> dict[str, str]:
    return {**server_env(server), "ORCHESTRATOR_MODEL_PRICES": LOCAL_PRICES}


def local_reply(text: str) -> RawReply:
    return RawReply(text=text, usage=Usage(1_000, 500), model="local-llm")


EXPECTED_USD = (1_000 * 1.0 + 500 * 2.0) / 1_000_000


def test_ask_prints_the_turn_line_on_stderr_only(cli, tmp_path: Path):
    with OpenAICompatibleServer([local_reply("It is done.")]) as server:
        done = cli("ask", "do it", cwd=tmp_path, env_extra=priced_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is done.\n"
    assert "turn: 1,000 tokens in · 500 out · $0.002" in done.stderr.splitlines()


def test_ask_prints_no_turn_line_when_the_price_is_unknown(cli, tmp_path: Path):
    with OpenAICompatibleServer([local_reply("It is done.")]) as server:
        done = cli("ask", "do it", cwd=tmp_path, env_extra=server_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is done.\n"
    assert "turn:" not in done.stderr


def test_ask_json_has_usage_and_cost(cli, tmp_path: Path):
    with OpenAICompatibleServer([local_reply("It is done.")]) as server:
        done = cli("ask", "--json", "do it", cwd=tmp_path, env_extra=priced_env(server))

    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["cost_usd"] == pytest.approx(EXPECTED_USD)
    assert body["usage"]["models"]["local-llm"]["input"] == 1_000
    assert body["usage"]["tokens"]["output"] == 500
    assert body["budget_stop"] is None
    assert "turn:" not in done.stderr, "the JSON carries the cost"


def test_ask_json_writes_a_small_cost_in_fixed_point(cli, tmp_path: Path):
    reply = RawReply(text="Done.", usage=Usage(10, 5), model="local-llm")  # $0.00002
    with OpenAICompatibleServer([reply]) as server:
        done = cli("ask", "--json", "do it", cwd=tmp_path, env_extra=priced_env(server))

    assert done.returncode == 0, done.stderr
    assert '"cost_usd": 0.00002,' in done.stdout
    # A number of the JSON (after ':', '[' or ','), not the hex of an id inside a string.
    assert not re.search(r"[:\[,]\s*-?\d+(\.\d+)?[eE]", done.stdout), "no scientific notation"
    assert json.loads(done.stdout)["cost_usd"] == pytest.approx(2e-05)


def test_piped_chat_cost_command(cli, tmp_path: Path):
    replies = [local_reply("One."), local_reply("Two.")]
    with OpenAICompatibleServer(replies) as server:
        stdin = "first\nsecond\n/cost\n"
        done = cli("chat", cwd=tmp_path, stdin=stdin, env_extra=priced_env(server))

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["One.", "Two."], "no cost line among the piped answers"
    assert row(done.stdout, "local-llm") == ["local-llm", "2", "2,000", "0", "1,000", "0", "$0.004"]
    assert done.stderr.count("turn: 1,000 tokens in · 500 out · $0.002") == 2
