"""Turn events say which model call of the turn starts, over how many messages, and when
(issue 46, item 7); a background job's notice says when it ended (tests/dispatch/test_background.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.conversation.turns import TurnEvent
from orchestrator.events import Stage
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel, call_tools


async def test_each_model_call_of_a_turn_says_its_round_and_message_count_and_every_status_its_time(tmp_path):
    model = ScriptedChatModel(steps=[call_tools(("calculator", {"expression": "6*7"})), "42."])
    runtime = Orchestrator.create(
        load_settings(sub_graphs_dir=tmp_path / "none"), model=model, checkpointer=InMemorySaver()
    )
    events: list[TurnEvent] = []
    before = datetime.now(UTC)
    await runtime.session(user_id="u").run("what is 6*7?", on_event=events.append)
    after = datetime.now(UTC)

    statuses = [e for e in events if e["kind"] == "status"]
    starts = [(e["stage"], e.get("round"), e.get("messages")) for e in statuses if "round" in e]
    assert starts == [(Stage.SUBMITTED, 1, 1), (Stage.PROCESSING, 2, 3)]
    for event in statuses:
        at = datetime.fromisoformat(event["at"])
        assert before - timedelta(seconds=1) <= at <= after + timedelta(seconds=1)

