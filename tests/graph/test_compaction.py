"""Long conversations fit the model's window: older messages summarised in the model's view (issue 29)."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from http import HTTPStatus
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from orchestrator.events import Stage
from orchestrator.graph.model_pipeline.compaction import (
    SUMMARY_HEADER,
    CompactionMiddleware,
    compact_now,
)
from orchestrator.llm.offline import OfflineChatModel
from orchestrator.llm.summary import SUMMARY_PROMPT, is_summary_request
from orchestrator.llm.tokens import estimate_tokens, prompt_tokens
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store.archived import archived_messages
from orchestrator.store.storage import Storage
from orchestrator.terminal.render import TurnRenderer
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel
from orchestrator.testing.openai_server import ErrorReply, JsonObject, Reply
from orchestrator.testing.scripted import call_tools
from orchestrator.usage.prices import ModelPrice
from tests.helpers import EventLog, make_session
from tests.tool_folders import parrot_agent

WINDOW = 3000
MODEL = {"model": "openai:test-model", "openai_api_key": "test-key", "model_max_retries": 0}
FILLER = "The weather report said it would rain in the afternoon and clear up by evening. " * 3


class ChattyServer(OpenAICompatibleServer):
    """Answers every turn, and every summary request with a short summary (or an error)."""

    def __init__(self, *, fail_summaries: bool = False) -> None:
        super().__init__(strict=True)
        self.fail_summaries = fail_summaries
        self.summaries = 0

    def next_reply(self, request: JsonObject) -> Reply | None:
        super().next_reply(request)  # records it, checks the history is valid
        messages = request["messages"]
        assert isinstance(messages, list)
        if is_summary_request(str(messages[0]["content"])):
            self.summaries += 1
            if self.fail_summaries:
                return ErrorReply(HTTPStatus.INTERNAL_SERVER_ERROR, "summary server down")
            return f"Summary {self.summaries}: the person asked about the weather."
        return f"Answer {len(self.requests)}: {FILLER}"


def request_tokens(request: JsonObject) -> int:
    """The request's size as the orchestrator estimates it (messages and tool schemas)."""
    messages = request["messages"]
    assert isinstance(messages, list)
    tokens = sum(4 + estimate_tokens(json.dumps(m.get("content") or "")) for m in messages)
    return tokens + estimate_tokens(json.dumps(request.get("tools") or []))


def server_session(server: OpenAICompatibleServer, *, saver: InMemorySaver, session_id: str = "s"):
    settings = load_settings(openai_base_url=server.base_url, context_tokens=WINDOW, **MODEL)
    runtime = Orchestrator.create(settings, checkpointer=saver)
    return runtime.session(user_id="u", session_id=session_id)


async def test_a_long_session_stays_in_its_window_and_the_archive_keeps_every_message(
    tmp_path: Path, database_url: str
):
    user, session_id = f"long-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:12]
    with ChattyServer() as server:
        settings = load_settings(
            database_url=database_url, data_dir=tmp_path, sub_graphs_dir=tmp_path / "none",
            embeddings="none", openai_base_url=server.base_url, context_tokens=WINDOW, **MODEL,
        )
        storage = await Storage.open(settings)
        try:
            runtime = Orchestrator.create(settings, storage=storage)
            session = runtime.session(user_id=user, session_id=session_id)
            for turn in range(300):
                result = await session.run(f"Question {turn}: {FILLER}")
                assert result.answer.startswith("Answer"), turn
            history = await session.history()
            held = (await session.graph.aget_state(session.config)).values["messages"]
            archived = await archived_messages(storage.database, session_id, user_id=user)
            reopened = runtime.session(user_id=user, session_id=session_id)
            assert await reopened.open() is False
            after = await reopened.run("Question after the restart")
        finally:
            await storage.close()
    turns = [r for r in server.requests if not is_summary_request(str(r["messages"][0]["content"]))]
    assert len(turns) == 301, "every turn answered"
    assert server.summaries > 0, "the conversation was compacted"
    assert max(request_tokens(r) for r in server.requests) <= WINDOW
    assert len(archived) == 600, "the archive keeps every message"
    assert [m.text for m in history] == [m.text for m in archived], "/history shows them all"
    assert [m.text for m in history[::2]] == [f"Question {n}: {FILLER}" for n in range(300)]
    assert len(held) < 60, "the checkpoint holds about what the window shows, not all 600"
    last = turns[-2]["messages"]
    assert "Question 299" in str(last[-1]["content"])
    assert any("Summary" in str(m["content"]) for m in last if m["role"] == "system")
    assert after.answer.startswith("Answer"), "a reopened session goes on from the summary"
    assert "Summary" in str(turns[-1]["messages"][1]["content"])


async def test_a_resumed_session_starts_from_the_stored_summary():
    saver = InMemorySaver()
    with ChattyServer() as server:
        first = server_session(server, saver=saver, session_id="kept")
        for turn in range(40):
            await first.run(f"Question {turn}: {FILLER}")
        summaries = server.summaries
        assert summaries > 0
        resumed = server_session(server, saver=saver, session_id="kept")
        await resumed.run("Question after the restart")
    sent = server.requests[-1]["messages"]
    assert server.summaries == summaries, "the stored summary was used, not written again"
    assert f"Summary {summaries}" in str(sent[1]["content"])
    assert "Question 0:" not in json.dumps(sent)


async def test_a_failed_summary_leaves_the_turn_running_on_a_cut_history():
    saver = InMemorySaver()
    with ChattyServer(fail_summaries=True) as server:
        session = server_session(server, saver=saver)
        events = EventLog()
        for turn in range(30):
            result = await session.run(f"Question {turn}: {FILLER}", on_event=events)
            assert result.answer.startswith("Answer"), turn
    assert server.summaries > 0
    notices = [
        e["detail"] for e in events if e["kind"] == "status" and e["stage"] == Stage.COMPACTED
    ]
    assert notices and all("summary failed" in n for n in notices)
    assert max(request_tokens(r) for r in server.requests) <= WINDOW


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}: {FILLER}"


def scripted_session(model: ScriptedChatModel, *, window: int = WINDOW):
    settings = load_settings(context_tokens=window)
    runtime = Orchestrator.create(
        settings, model=model, tools=[lookup], checkpointer=InMemorySaver()
    )
    return runtime.session(user_id="u")


def summarising(step):
    """A script step that answers summary requests with a summary, everything else with `step`."""

    def reply(messages):
        if isinstance(messages[0], SystemMessage) and is_summary_request(messages[0].text):
            return "Summary: keys were looked up."
        return step(messages) if callable(step) else step

    return reply


async def test_a_tool_call_and_its_result_are_never_split():
    def turn(messages):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return f"Found it. {FILLER}"
        return call_tools(("lookup", {"key": "k"}))

    model = ScriptedChatModel(steps=[summarising(turn)] * 400)
    session = scripted_session(model)
    for number in range(60):
        await session.run(f"look up key {number}")
    turns = [r for r in model.received if not is_summary_request(r[0].text)]
    for sent in turns:
        calls = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
        answers = [m.tool_call_id for m in sent if isinstance(m, ToolMessage)]
        assert sorted(answers) == sorted(calls), "each call is sent with its result"
    assert len(turns) < len(model.received), "it compacted"


async def test_the_offline_model_writes_an_extractive_summary():
    summary = await OfflineChatModel().ainvoke(
        [SystemMessage(SUMMARY_PROMPT), AIMessage("person: Book a room. For two nights.")]
    )
    assert summary.text == "person: Book a room."


async def test_a_message_too_large_for_the_window_is_cut_with_a_marker():
    model = ScriptedChatModel(steps=[summarising("ok")] * 5)
    session = scripted_session(model)
    result = await session.run("x" * 40_000)
    assert result.answer == "ok"
    sent = model.received[-1][-1].text
    assert len(sent) < 4 * WINDOW and "cut" in sent
    assert len((await session.history())[0].text) == 40_000, "the state keeps it whole"


async def test_the_turn_that_compacted_says_so_and_the_renderer_shows_a_quiet_line():
    model = ScriptedChatModel(steps=[summarising(f"ok. {FILLER}")] * 200)
    session = scripted_session(model)
    err = io.StringIO()
    results = []
    for number in range(40):
        renderer = TurnRenderer(out=Console(file=io.StringIO()), err=Console(file=err))
        result = await session.run(f"Question {number}: {FILLER}", on_event=renderer)
        renderer.finish(result)
        results.append(result)
    compacted = [r.compacted for r in results if r.compacted is not None]
    assert results[0].to_json()["compacted"] is None
    assert compacted and all(c["saved_tokens"] > 0 and not c["failed"] for c in compacted)
    assert len(compacted) < len(results), "only the turns that compacted say so"
    assert "older message(s) summarised" in err.getvalue()
    assert "tokens saved" in err.getvalue()


def approve_all(folder: object, status: object) -> bool:
    return True


async def test_a_nested_agent_compacts_its_own_history_under_its_own_window(tmp_path: Path):
    def step(messages):
        if is_summary_request(messages[0].text):
            return "Summary: the parrot repeated the weather report."
        if "You are parrot" not in messages[0].text:  # the orchestrator
            if isinstance(messages[-1], ToolMessage):
                return "The parrot is done."
            return call_tools(("parrot_ask", {"request": "repeat the report 12 times"}))
        rounds = sum(isinstance(m, ToolMessage) for m in messages)
        if rounds >= 12 or any("Summary:" in m.text for m in messages[1:2]) and rounds >= 3:
            return "Repeated it."
        return call_tools(("echo_say", {"text": FILLER * 2}))

    root = tmp_path / "sub_graphs"
    parrot_agent(root, llm={"context_tokens": 2000})
    model = ScriptedChatModel(steps=[step] * 100)
    settings = load_settings(
        sub_graphs_dir=root, data_dir=tmp_path / "data", max_tool_iterations=30
    )
    runtime = Orchestrator.create(
        settings, model=model, checkpointer=InMemorySaver(), ask=approve_all
    )
    events = EventLog()
    result = await runtime.session(user_id="u").run("make the parrot repeat the report", on_event=events)

    assert result.answer == "The parrot is done."
    shown = [e["detail"] for e in events if e["kind"] == "status" and e["stage"] == Stage.COMPACTED]
    assert shown and all(d.startswith("context of parrot: ") for d in shown), "the person sees it"
    assert result.compacted is None, "ask --json's `compacted` is the orchestrator's own"
    parrot = [r for r in model.received if "You are parrot" in r[0].text]
    top = [r for r in model.received if "You are parrot" not in r[0].text]
    assert any(is_summary_request(r[0].text) for r in model.received), "the parrot compacted"
    assert max(prompt_tokens(r) for r in parrot) <= 2000, "each of its calls fits its window"
    assert not any(
        m.text.startswith(SUMMARY_HEADER) for r in top for m in r
    ), "the orchestrator's own history (32000 tokens) did not need it"
    assert result.tool_calls[0].status == "success"


async def test_the_count_is_corrected_by_the_input_tokens_the_server_reports():
    def answer(reported_factor: int):
        def reply(messages):
            estimate = prompt_tokens(messages)
            usage = {
                "input_tokens": estimate * reported_factor,
                "output_tokens": 1,
                "total_tokens": estimate * reported_factor + 1,
            }
            return AIMessage("ok", usage_metadata=usage) if reported_factor else AIMessage("ok")

        return summarising(reply)

    counts = []
    for factor in (0, 3):
        model = ScriptedChatModel(steps=[answer(factor)] * 40)
        session = scripted_session(model)
        for number in range(12):
            await session.run(f"Question {number}: {FILLER}")
        counts.append(sum(is_summary_request(r[0].text) for r in model.received))
    assert counts[0] == 0, "by the estimate alone the conversation fits"
    assert counts[1] > 0, "the server counts three times as many tokens: it did not fit"


async def test_summaries_are_written_by_the_summary_model_when_one_is_set():
    with ChattyServer() as server:
        settings = load_settings(
            openai_base_url=server.base_url,
            context_tokens=WINDOW,
            summary_model="openai:summary-model",
            **MODEL,
        )
        session = Orchestrator.create(settings, checkpointer=InMemorySaver()).session(user_id="u")
        for turn in range(20):
            await session.run(f"Question {turn}: {FILLER}")
    summaries = [r for r in server.requests if is_summary_request(str(r["messages"][0]["content"]))]
    turns = [r for r in server.requests if r not in summaries]
    assert summaries and {r["model"] for r in summaries} == {"summary-model"}
    assert {r["model"] for r in turns} == {"test-model"}


async def test_a_summary_call_is_counted_like_any_model_call():
    with ChattyServer() as server:
        session = server_session(server, saver=InMemorySaver())
        results = [await session.run(f"Question {turn}: {FILLER}") for turn in range(24)]
    compacting = [r for r in results if r.compacted is not None]
    assert len(compacting) == server.summaries > 0
    for result in compacting:
        (counted,) = result.usage.models.values()
        assert counted.calls == 2, "the turn's own call and its summary call"
    quiet = [r for r in results if r.compacted is None]
    assert all(next(iter(r.usage.models.values())).calls == 1 for r in quiet)


async def test_a_summary_call_that_would_pass_the_budget_is_not_made():
    model = ScriptedChatModel(steps=["Summary: never written."])
    prices = {"scripted": ModelPrice(input=1.0, output=1.0)}
    session = make_session(model, [], model_prices=prices, max_turn_cost_usd=0.000001)
    history = [
        message
        for n in range(40)
        for message in (HumanMessage(f"Question {n}: {FILLER}", id=f"q{n}"), AIMessage("ok", id=f"a{n}"))
    ]
    middleware = CompactionMiddleware(model=model, window=WINDOW)

    summary, done = await compact_now(
        middleware, system=SystemMessage("system"), messages=history, summary=None, run=session.context
    )
    assert model.received == [], "the model was not called"
    assert done is not None and done.failed and "summary failed" in done.line()
    assert summary is not None and summary["failed"] and summary["text"] == ""
    assert session.usage.stop is not None, "the budget stops the turn's next call too"


async def test_a_summary_call_that_never_answers_ends_at_the_model_timeout_as_a_failed_summary():
    class NeverAnswers(ScriptedChatModel):
        async def ainvoke(self, *args: object, **kwargs: object) -> AIMessage:  # type: ignore[override]
            await asyncio.Event().wait()  # a server that holds the request open
            raise AssertionError("unreachable")

    history = [
        message
        for n in range(40)
        for message in (HumanMessage(f"Question {n}: {FILLER}", id=f"q{n}"), AIMessage("ok", id=f"a{n}"))
    ]
    middleware = CompactionMiddleware(model=NeverAnswers(), window=WINDOW, timeout_seconds=0.05)

    summary, done = await compact_now(middleware, system=SystemMessage("system"), messages=history, summary=None)

    assert done is not None and done.failed and "summary failed" in done.line()
    assert summary is not None and summary["failed"]
