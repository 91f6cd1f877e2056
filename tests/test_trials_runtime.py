"""Runtime breaks found by the trials (issue 27): unreported usage, file modes, contained
tool exits, redaction of the embedded server's passwords, embeddings drained at exit."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import tool

from orchestrator.private import open_private_log, private_data_dir

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


# --- 7. what the product writes is private --------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that lets others read what is made without a mode of its own."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


async def test_the_data_directory_logs_and_approvals_are_private(tmp_path: Path, open_umask):
    from tests.test_mcp_folders import Person, fixture_folder, started

    data = tmp_path / "data"
    earlier_log = data / "logs" / "mcp" / "fx.log"
    earlier_log.parent.mkdir(parents=True)
    earlier_log.write_text("an earlier run's line\n")
    earlier_log.chmod(0o644)
    control = tmp_path / "fx"
    fixture_folder(tmp_path / "sub_graphs", "fx", control)
    (control / "fail").touch()  # the server prints a line to standard error and exits

    async with started(Person()):
        pass

    assert "told to fail" in earlier_log.read_text()
    assert mode(earlier_log) == 0o600, "a log made earlier with other modes is made private"
    assert mode(data / "logs") == mode(data / "logs" / "mcp") == 0o700
    assert mode(data / "tool_registry") == 0o700
    assert [mode(f) for f in (data / "tool_registry").iterdir()] == [0o600]


def test_the_data_directory_is_private_and_passable_only_as_root(tmp_path: Path, open_umask):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    private_data_dir(data)
    assert mode(data) == (0o711 if os.geteuid() == 0 else 0o700)


def test_a_new_log_is_private_and_so_is_its_folder(tmp_path: Path, open_umask):
    log = tmp_path / "logs" / "mcp" / "new.log"
    with open_private_log(log, levels=2) as file:
        file.write("key=abc\n")
    assert (mode(log), mode(log.parent), mode(log.parent.parent)) == (0o600, 0o700, 0o700)
