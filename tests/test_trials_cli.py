"""Issue 27's terminal items: sessions, the terminal, `ask`, and how costs are written."""

from __future__ import annotations

import io
import json
import re
import uuid
from pathlib import Path

from rich.console import Console

from orchestrator.cli.cost import cost_table, turn_cost_line
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, Usage
from orchestrator.turns import TurnResult
from orchestrator.usage.meter import UsageMeter
from orchestrator.usage.money import usd
from orchestrator.usage.tokens import TokenCount
from tests.helpers import server_env

SCIENTIFIC = re.compile(r"\d[eE][-+]?\d")
LOCAL_PRICES = json.dumps({"local-llm": {"input": 1.0, "output": 2.0}})  # $ per million


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- item 19 (part): costs in fixed-point dollars, null where a price is unknown ----------------


def test_small_costs_are_written_in_fixed_point():
    assert usd(0.0000045) == "$0.0000045"
    assert usd(0.000195) == "$0.000195"
    assert usd(0.0000012345) == "$0.00000123"
    assert usd(0.0000001) == "< $0.000001"
    assert usd(0.0123) == "$0.0123"
    assert usd(1.5) == "$1.50"


def test_the_turn_line_and_cost_table_never_use_scientific_notation():
    meter = UsageMeter()
    meter.add_model("tiny-model", TokenCount(input=3, output=1), 0.0000045, seconds=0.1)
    result = TurnResult(answer="ok", answer_id="m1", iterations=1, usage=meter.turn)
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    console.print(cost_table(meter))
    table = console.file.getvalue()  # type: ignore[attr-defined]

    line = turn_cost_line(result)
    assert line is not None and line.endswith("$0.0000045")
    assert "$0.0000045" in table
    assert not SCIENTIFIC.search(table) and not SCIENTIFIC.search(line)


def test_usage_json_total_is_null_when_a_price_is_unknown_like_ask_json(cli, tmp_path: Path):
    user = unique("u")
    reply = RawReply(text="One.", usage=Usage(30, 3), model="mystery")
    with OpenAICompatibleServer([reply]) as server:
        env = {**server_env(server), "ORCHESTRATOR_MODEL_PRICES": LOCAL_PRICES}
        asked = cli("ask", "--json", "--user", user, "first", cwd=tmp_path, env_extra=env)
    usage = cli("usage", "--user", user, "--json", cwd=tmp_path)

    assert asked.returncode == 0 and usage.returncode == 0, usage.stderr
    assert json.loads(asked.stdout)["cost_usd"] is None
    body = json.loads(usage.stdout)
    assert body["total"]["cost_usd"] is None
    assert [day["cost_usd"] for day in body["days"].values()] == [None]
    assert body["total"]["price_unknown"] == ["mystery"]
