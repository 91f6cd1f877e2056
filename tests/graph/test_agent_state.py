"""An agent folder's `state:` (issue 46, item 3): what conversation each of its calls starts from.

Three turns of the orchestrator each ask the parrot agent something; the scripted
model keeps what the parrot's model received at each call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.folders.tool_config import ToolConfig
from orchestrator.graph.caller_view import CALLER_NOTE
from orchestrator.graph.model_pipeline.compaction import SUMMARY_HEADER
from orchestrator.llm.summary import is_summary_request
from orchestrator.llm.tokens import prompt_tokens
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.sources.adapter import ActionTool
from orchestrator.store import Database
from orchestrator.store.agent_conversations import AgentConversations
from orchestrator.store.storage import Storage
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.agent_state import AgentState, MemoryConversations, SavedConversation
from tests.helpers import run_cli, storage_for
from tests.tool_folders import approve_all, parrot_agent, write_folder


class Script:
    """The orchestrator asks the parrot `req N` at its Nth turn; the parrot answers `reply N`,
    or, with `long`, a long reply; what the parrot's model received is kept in `seen`."""

    def __init__(self, *, long: int = 0) -> None:
        self.seen: list[list[BaseMessage]] = []
        self.long = long
        self.turns = 0

    def step(self, messages: list[BaseMessage]) -> str | AIMessage:
        if is_summary_request(messages[0].text):
            return "Earlier: the parrot was asked things and replied."
        if "You are parrot" in messages[0].text:
            self.seen.append(messages)
            reply = f"reply {len(self.seen)}."
            return reply + " squawk" * self.long
        if isinstance(messages[-1], ToolMessage):
            return f"answer {self.turns}."
        self.turns += 1
        return call_tools(("parrot_ask", {"request": f"req {self.turns}"}))

    def model(self) -> ScriptedChatModel:
        return ScriptedChatModel(steps=[self.step] * 200)


def texts(messages: list[BaseMessage]) -> list[str]:
    """What the parrot's model read after its system prompt."""
    return [m.text for m in messages[1:]]


def settings_with(
    tmp_path: Path, *, state: str, llm: dict[str, object] | None = None
) -> Settings:
    parrot_agent(tmp_path / "sub_graphs", llm=llm, state=state)
    settings = load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")
    approve_all(settings)
    return settings


async def three_turns(
    settings: Settings,
    script: Script,
    *,
    user: str = "u",
    storage: Storage | None = None,
    padding: str = "",
) -> None:
    runtime = Orchestrator.create(
        settings, model=script.model(), checkpointer=InMemorySaver(), storage=storage
    )
    session = runtime.session(user_id=user)
    for number in range(1, 4):
        result = await session.run(f"hello {number}{padding}")
        assert result.answer == f"answer {script.turns}."
    await runtime.close()


async def test_local_sees_only_the_request_each_time(tmp_path: Path):
    script = Script()
    await three_turns(settings_with(tmp_path, state="local"), script)

    assert [texts(seen) for seen in script.seen] == [["req 1"], ["req 2"], ["req 3"]]
    assert ToolConfig(name="a", description="An agent.", version="1", kind="agent").state == "local"


async def test_parent_sees_the_callers_recent_text_turns_and_no_tool_calls(tmp_path: Path):
    script = Script()
    await three_turns(settings_with(tmp_path, state="parent"), script)

    assert texts(script.seen[0]) == [CALLER_NOTE_TEXT, "hello 1", "req 1"]
    assert texts(script.seen[2]) == [
        CALLER_NOTE_TEXT, "hello 1", "answer 1.", "hello 2", "answer 2.", "hello 3", "req 3"
    ]
    sent = [m for seen in script.seen for m in seen]
    assert not any(isinstance(m, ToolMessage) for m in sent)
    assert not any(isinstance(m, AIMessage) and m.tool_calls for m in sent)


async def test_parent_sees_only_what_fits_a_quarter_of_its_window(tmp_path: Path):
    script = Script()
    # A 1000-token window: the caller's conversation gets 250, two of its 100-token messages.
    settings = settings_with(tmp_path, state="parent", llm={"context_tokens": 1000})
    await three_turns(settings, script, padding=" word" * 80)

    seen = [text.split(" word")[0] for text in texts(script.seen[2])]
    assert seen == [CALLER_NOTE_TEXT, "answer 1.", "hello 2", "answer 2.", "hello 3", "req 3"]


async def test_standalone_continues_its_own_conversation_in_memory_without_storage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    script = Script()
    with caplog.at_level(logging.WARNING):
        await three_turns(settings_with(tmp_path, state="standalone"), script)

    assert texts(script.seen[2]) == ["req 1", "reply 1.", "req 2", "reply 2.", "req 3"]
    assert "hello 1" not in str(texts(script.seen[2])), "not its caller's conversation"
    assert any(
        "`state: standalone` without a database" in r.getMessage() for r in caplog.records
    )


async def test_standalone_is_kept_per_user_and_continues_in_a_new_orchestrator(
    database_url: str, tmp_path: Path
):
    settings = settings_with(tmp_path, state="standalone")
    first, second, other = Script(), Script(), Script()
    async with storage_for(database_url, tmp_path / "store") as storage:
        await three_turns(settings, first, user="alice", storage=storage)
        await three_turns(settings, other, user="bob", storage=storage)
        await three_turns(settings, second, user="alice", storage=storage)  # a new Orchestrator

    assert texts(first.seen[2]) == ["req 1", "reply 1.", "req 2", "reply 2.", "req 3"]
    assert texts(other.seen[0]) == ["req 1"], "bob does not see alice's conversation"
    assert texts(second.seen[0]) == [
        "req 1", "reply 1.", "req 2", "reply 2.", "req 3", "reply 3.", "req 1"
    ]


async def test_a_standalone_conversation_is_kept_compacted(
    database: Database, database_url: str, tmp_path: Path
):
    script = Script(long=400)  # each reply some 700 tokens: a 4000-token window fills in 4 calls
    settings = settings_with(tmp_path, state="standalone", llm={"context_tokens": 4000})
    async with storage_for(database_url, tmp_path / "store") as storage:
        for _ in range(3):
            await three_turns(settings, script, user="carol", storage=storage)
    kept = await AgentConversations(database).load("carol", ["parrot"])

    assert kept.summary is not None, "compaction summarised the older calls"
    assert any(SUMMARY_HEADER in m.text for m in script.seen[-1])
    assert len(script.seen) == 9
    assert len(kept.messages) < 2 * 9, "what the summary stands for is not kept"
    assert all(m.text != "req 1" for m in kept.messages)
    assert max(prompt_tokens(seen) for seen in script.seen) < 4000


async def test_a_tool_folder_with_a_state_is_skipped_with_one_clear_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    root = tmp_path / "sub_graphs"
    config: dict[str, object] = {"name": "echo", "description": "Echoes.", "version": "1.0", "state": "standalone"}
    write_folder(root, "echo", config=config)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    approve_all(settings)
    with caplog.at_level(logging.WARNING):
        runtime = Orchestrator.create(settings, model=ScriptedChatModel(), checkpointer=InMemorySaver())

    assert not [t for t in runtime.tools if t.name.startswith("echo_")]
    assert any("`state: standalone` is for agent folders" in r.getMessage() for r in caplog.records)


CALLER_NOTE_TEXT = f"(A note from the orchestrator, not from the user.) {CALLER_NOTE}"


def test_tools_show_says_an_agents_state(tmp_path: Path):
    parrot_agent(tmp_path / "sub_graphs", state="standalone")

    report = json.loads(run_cli("tools", "show", "parrot", "--json", cwd=tmp_path).stdout)
    shown = run_cli("tools", "show", "parrot", cwd=tmp_path).stdout

    assert report["state"] == {"value": "standalone", "origin": "tool_config.yaml"}
    assert "state: standalone, its own conversation with each user" in shown


class BrokenStore(MemoryConversations):
    async def save(self, user_id: str, agent_path: Sequence[str], conversation: SavedConversation) -> None:
        raise OSError("the disk is full")


async def test_an_exchange_that_cannot_be_kept_is_said_and_the_answer_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    script = Script()
    settings = settings_with(tmp_path, state="standalone")
    runtime = Orchestrator.create(settings, model=script.model(), checkpointer=InMemorySaver())
    parrot = next(t for t in runtime.tools if isinstance(t, ActionTool) and t.name == "parrot_ask")
    assert isinstance(parrot.owner, AgentTool)
    parrot.owner._state = AgentState("standalone", store=BrokenStore())  # pyright: ignore[reportPrivateUsage]
    with caplog.at_level(logging.WARNING):
        result = await runtime.session(user_id="u").run("hello 1")

    assert result.answer == "answer 1."
    assert result.tool_calls[0].status == "success"
    assert any(
        "parrot: this call's exchange was not kept in its standalone conversation: OSError: the disk is full"
        in r.getMessage() for r in caplog.records
    )


async def test_a_standalone_call_that_asks_you_first_is_kept_once_answered(tmp_path: Path):
    """The agent runs inside the caller's run: its gated call pauses the turn, the answer
    resumes it, and its conversation is kept once, request and all, only then."""
    settings = settings_with(tmp_path, state="standalone")
    echo = tmp_path / "sub_graphs" / "parrot" / "src" / "sub_graphs" / "echo" / "tool_config.yaml"
    echo.write_text(echo.read_text() + "requires_approval: true\n")
    approve_all(settings)
    seen: list[list[BaseMessage]] = []

    def step(messages: list[BaseMessage]) -> str | AIMessage:
        if "You are parrot" in messages[0].text:
            seen.append(messages)
            if isinstance(messages[-1], ToolMessage):
                return f"said {messages[-1].text.count('polly')} polly."
            return call_tools(("echo_say", {"text": "polly"}))
        if isinstance(messages[-1], ToolMessage):
            return "done."
        return call_tools(("parrot_ask", {"request": messages[-1].text}))

    runtime = Orchestrator.create(
        settings, model=ScriptedChatModel(steps=[step] * 20), checkpointer=InMemorySaver()
    )
    session = runtime.session(user_id="u")
    paused = await session.run("req 1")
    assert len(paused.questions) == 1 and paused.answer == ""
    kept = runtime_state(runtime)
    assert await kept.load("u", ["parrot"]) == SavedConversation(), "nothing kept while it waits"

    done = await session.answer({paused.questions[0].id: {"type": "approve"}})
    assert done.answer == "done."
    assert (await session.run("req 2")).questions, "the second call asks too"

    assert [m.text for m in seen[-1][1:] if isinstance(m, HumanMessage)] == ["req 1", "req 2"]
    saved = await kept.load("u", ["parrot"])
    assert [m.type for m in saved.messages] == ["human", "ai", "tool", "ai"]


def runtime_state(runtime: Orchestrator) -> MemoryConversations:
    parrot = next(t for t in runtime.tools if isinstance(t, ActionTool) and t.name == "parrot_ask")
    assert isinstance(parrot.owner, AgentTool)
    store = parrot.owner.state.store
    assert isinstance(store, MemoryConversations)
    return store
