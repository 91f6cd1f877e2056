"""Compaction when the system prompt and tool schemas fill much of the window (issue 42, item 7).

Compaction cannot shrink what every call sends: it runs only when it can bring
the prompt under its target, never again for nothing, and the person is told
once a session when the tools crowd the window.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.events import Stage
from orchestrator.graph.model_pipeline.window_notice import WindowUse
from orchestrator.llm.summary import is_summary_request
from orchestrator.llm.tokens import estimate_tokens, prompt_tokens
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel
from orchestrator.testing.scripted import call_tools
from tests.helpers import EventLog
from tests.tool_folders import copy_shipped, parrot_agent

FILLER = "The weather report said it would rain in the afternoon and clear up by evening. " * 3
TURNS = 40
CROWDED = re.compile(r"take (\d+)% of the model's ([\d,]+)-token window")
SAVED = re.compile(r"older message\(s\) summarised, (\d+) tokens saved")


def is_summary(messages: list[BaseMessage]) -> bool:
    return isinstance(messages[0], SystemMessage) and is_summary_request(messages[0].text)


def asks_the_time(messages: list[BaseMessage]) -> object:
    """Each turn: the model asks for the time, then answers at some length; summaries are short."""
    if is_summary(messages):
        return "Summary: the person asked about the weather and the time."
    if isinstance(messages[-1], ToolMessage):
        return f"It is that time. {FILLER}"
    return call_tools(("current_time", {}))


def shipped_tool_tokens(tmp_path: Path) -> int:
    """What the shipped folders' tool schemas take of every call (they grow as agents gain actions)."""
    settings = load_settings(sub_graphs_dir=copy_shipped(tmp_path), data_dir=tmp_path / "data")
    runtime = Orchestrator.create(settings, model=ScriptedChatModel(steps=[]), ask=lambda *_: True)
    return estimate_tokens(json.dumps([convert_to_openai_tool(t) for t in runtime.tools]))


async def shipped_conversation(tmp_path: Path, *, window: int) -> tuple[ScriptedChatModel, list[str], int]:
    """TURNS turns with the shipped folders in `window`: the model, the context notes, the tools' tokens."""
    settings = load_settings(
        sub_graphs_dir=copy_shipped(tmp_path), data_dir=tmp_path / "data", context_tokens=window
    )
    model = ScriptedChatModel(steps=[asks_the_time] * (5 * TURNS))
    runtime = Orchestrator.create(
        settings, model=model, checkpointer=InMemorySaver(), ask=lambda folder, status: True
    )
    session = runtime.session(user_id="u")
    events = EventLog()
    for number in range(TURNS):
        result = await session.run(f"Question {number}: {FILLER}", on_event=events)
        assert result.answer.startswith("It is that time."), number
    notes = [e["detail"] for e in events if e["kind"] == "status" and e["stage"] == Stage.COMPACTED]
    schemas = [convert_to_openai_tool(t) for t in runtime.tools]
    return model, notes, estimate_tokens(json.dumps(schemas))


@pytest.mark.process  # copy_shipped asks git which files are shipped
async def test_the_shipped_tools_in_a_crowded_window_compact_only_when_it_helps_and_say_so_once(
    tmp_path: Path,
):
    # The tools take three quarters of the window, as 16 tools' 3,116 tokens did of 4,096.
    crowded_window = round(shipped_tool_tokens(tmp_path / "measure") * 4096 / 3116)
    model, notes, tool_tokens = await shipped_conversation(tmp_path, window=crowded_window)

    crowded = [n for n in notes if CROWDED.search(n)]
    assert len(crowded) == 1, f"told once a session, not once a call: {notes}"
    share, window = CROWDED.search(crowded[0]).groups()  # type: ignore[union-attr]
    assert window == f"{crowded_window:,}" and int(share) > 50
    assert "fewer tool folders at the top of sub_graphs/" in crowded[0]
    assert "ORCHESTRATOR_CONTEXT_TOKENS" in crowded[0]
    summaries = [r for r in model.received if is_summary(r)]
    saved = [int(m.group(1)) for n in notes if (m := SAVED.search(n))]
    assert len(saved) == len(summaries), f"every summary call gained something: {notes}"
    assert summaries, "compaction still runs when the prompt would not fit the window"
    assert len(summaries) <= TURNS // 4, f"not at every call: {len(summaries)} in {TURNS} turns"
    assert min(saved) > 300, f"each compaction folds many messages in: {saved}"
    calls = [r for r in model.received if not is_summary(r)]
    assert max(prompt_tokens(r) + tool_tokens for r in calls) <= crowded_window, "every call fits"


@pytest.mark.process  # copy_shipped asks git which files are shipped
async def test_the_shipped_tools_in_a_window_with_room_compact_as_before_without_a_note(tmp_path: Path):
    # The tools take two fifths of the window, as 3,116 tokens did of 8,000.
    roomy = round(shipped_tool_tokens(tmp_path / "measure") * 8000 / 3116)
    model, notes, tool_tokens = await shipped_conversation(tmp_path, window=roomy)

    assert not [n for n in notes if CROWDED.search(n)], notes
    saved = [int(m.group(1)) for n in notes if (m := SAVED.search(n))]
    assert saved and len(saved) == len(notes) and min(saved) > 500, notes
    calls = [r for r in model.received if not is_summary(r)]
    assert max(prompt_tokens(r) + tool_tokens for r in calls) <= 0.8 * roomy, "under the threshold"


# A tool whose schema takes two thirds of a 3000-token window: the threshold (2400) is out of
# compaction's reach once the longest summary is counted; the window itself is not.
@tool(description="List what is on a shelf of the warehouse." + " Each field is described at length." * 170)
def inventory(shelf: str) -> str:
    """List what is on a shelf."""
    return f"shelf {shelf}: nothing"


def rambling(messages: list[BaseMessage]) -> str:
    """A summariser that writes as much as it may; an answer of some length otherwise."""
    if is_summary(messages):
        return "Summary: " + "the person asked about the weather again and again, " * 60
    return f"ok. {FILLER}"


async def test_with_the_tools_in_most_of_the_window_compaction_waits_until_the_prompt_would_not_fit():
    model = ScriptedChatModel(steps=[rambling] * 200)
    settings = load_settings(context_tokens=3000)
    runtime = Orchestrator.create(settings, model=model, tools=[inventory], checkpointer=InMemorySaver())
    session = runtime.session(user_id="u")
    events = EventLog()
    results = [await session.run(f"Question {n}: {FILLER}", on_event=events) for n in range(30)]

    tool_tokens = estimate_tokens(json.dumps([convert_to_openai_tool(inventory)]))
    sizes = [prompt_tokens(r) + tool_tokens for r in model.received]
    kinds = "".join("S" if is_summary(r) else "T" for r in model.received)
    first = kinds.index("S")
    assert max(sizes[:first]) > 0.8 * 3000, "past the threshold, out of its reach: no summary yet"
    assert max(s for s, kind in zip(sizes, kinds, strict=True) if kind == "T") <= 3000
    assert "STS" not in kinds, f"never on two calls in a row: {kinds}"
    compacted = [r.compacted for r in results if r.compacted is not None]
    assert len(compacted) == kinds.count("S") and all(c["saved_tokens"] > 0 for c in compacted)
    notes = [e["detail"] for e in events if e["kind"] == "status" and e["stage"] == Stage.COMPACTED]
    assert len([n for n in notes if CROWDED.search(n)]) == 1, notes


def test_the_note_names_what_to_change_at_its_level():
    top = WindowUse(window=4096, system=76, tools=3116, tool_count=16, from_profile=False)
    nested = WindowUse(window=1000, system=100, tools=401, tool_count=3, from_profile=False)
    profiled = WindowUse(window=8192, system=100, tools=5000, tool_count=40, from_profile=True)

    assert top.crowded() and nested.crowded() and profiled.crowded()
    assert not WindowUse(window=1000, system=100, tools=400, tool_count=3, from_profile=False).crowded()
    assert not WindowUse(window=1000, system=100, tools=300, tool_count=3, from_profile=False).crowded()
    assert WindowUse(window=1000, system=100, tools=300, tool_count=3, from_profile=False).crowded(
        correction=2.0
    ), "counted as the server counts"
    assert top.line() == (
        "context: the system prompt (76 tokens) and 16 tools' schemas (3,116 tokens) take 78% of the "
        "model's 4,096-token window, leaving the conversation little room and compaction little to "
        "gain: approve fewer tool folders at the top of sub_graphs/ (an agent folder can hold several), "
        "or use a larger window (ORCHESTRATOR_CONTEXT_TOKENS, as far as the model takes)"
    )
    line = nested.line(agent_path=("assistant", "parrot"))
    assert line.startswith("context of assistant > parrot: ")
    assert "fewer tool folders under parrot" in line
    assert "`llm: {context_tokens: N}` in parrot's tool_config.yaml" in line
    assert "a model with a larger window (this one's profile gives 8,192)" in profiled.line()


async def test_a_nested_agent_in_a_crowded_window_is_noted_once_a_session_not_once_a_call(tmp_path: Path):
    def step(messages: list[BaseMessage]) -> object:
        if "You are parrot" in messages[0].text:
            return "Repeated it."
        if isinstance(messages[-1], ToolMessage):
            return "The parrot is done."
        return call_tools(("parrot_ask", {"request": "repeat the report"}))

    root = tmp_path / "sub_graphs"
    parrot_agent(root, llm={"context_tokens": 1000})
    config = root / "parrot" / "tool_config.yaml"  # instructions that take 60% of its window
    written = yaml.safe_load(config.read_text())
    written["instructions"] += " Repeat it faithfully." * 100
    config.write_text(yaml.safe_dump(written))
    model = ScriptedChatModel(steps=[step] * 20)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    runtime = Orchestrator.create(
        settings, model=model, checkpointer=InMemorySaver(), ask=lambda folder, status: True
    )
    notes: dict[str, list[str]] = {}
    for session_id in ("first", "second"):
        session = runtime.session(user_id="u", session_id=session_id)
        events = EventLog()
        for _ in range(3):
            assert (await session.run("make the parrot repeat", on_event=events)).answer == "The parrot is done."
        notes[session_id] = [
            e["detail"] for e in events if e["kind"] == "status" and e["stage"] == Stage.COMPACTED
        ]

    for shown in notes.values():
        assert len(shown) == 1 and shown[0].startswith("context of parrot: the system prompt"), shown
        assert "fewer tool folders under parrot" in shown[0]
