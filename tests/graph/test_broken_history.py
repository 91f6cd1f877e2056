"""No model output or user input breaks a session (issue #9, items 10, 11, 12 and 15).

The real ChatOpenAI client talks to the scripted server, which sends what a
broken or hostile server would; `strict=True` makes it refuse, as OpenAI does,
any history a strict server would refuse, so a later turn proves the history
stayed valid.
"""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console
from sqlalchemy import text

from orchestrator.conversation.session import Session
from orchestrator.errors import IncompleteReplyError
from orchestrator.events import ToolPhase
from orchestrator.graph.builder import MODEL_NODE
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.store.storage import Storage
from orchestrator.terminal.render import TurnRenderer
from orchestrator.testing import OpenAICompatibleServer, RawReply, RawToolCall
from orchestrator.testing.openai_server import history_problem
from tests.helpers import EventLog, make_session

MODEL = {"model": "openai:test-model", "openai_api_key": "test-key", "model_max_retries": 0}


def session_on(server: OpenAICompatibleServer) -> Session:
    settings = load_settings(openai_base_url=server.base_url, **MODEL)
    return Orchestrator.create(settings, checkpointer=InMemorySaver()).session(user_id="u")


def tool_replies(server: OpenAICompatibleServer, request: int) -> list[dict[str, object]]:
    """The tool messages the model was sent in the given request (0-based)."""
    return [m for m in server.requests[request]["messages"] if m["role"] == "tool"]


def model_text(reply: dict[str, object]) -> dict[str, object]:
    return json.loads(str(reply["content"]))


# --- item 10: a call cut mid-arguments is never run ------------------------------------------


@pytest.mark.parametrize(
    "ending", [{"cut": True}, {"finish_reason": "length"}], ids=["no-finish-reason", "length"]
)
async def test_a_call_cut_mid_arguments_is_not_run_and_the_model_is_told(ending):
    cut = RawReply(tool_calls=[RawToolCall("calculator", '{"expression": "4')], **ending)
    with OpenAICompatibleServer([cut, "Let me ask again."], strict=True) as server:
        result = await session_on(server).run("what is 4?")

    assert result.answer == "Let me ask again."
    (call,) = result.tool_calls
    assert (call.name, call.arguments, call.status) == ("calculator", {}, "failure")
    (reply,) = tool_replies(server, 1)
    body = model_text(reply)
    assert "did not arrive whole" in body["message"] and "value" not in body
    assert body["error_code"] == "invalid_arguments"


async def test_in_a_cut_reply_only_the_call_that_was_cut_is_refused():
    whole = RawToolCall.of("calculator", {"expression": "6*7"})
    calls = [whole, RawToolCall("calculator", '{"expr')]
    cut = RawReply(tool_calls=calls, cut=True)
    with OpenAICompatibleServer([cut, "42, and the other was cut."], strict=True) as server:
        result = await session_on(server).run("two sums")

    assert [c.status for c in result.tool_calls] == ["success", "failure"]
    first, second = tool_replies(server, 1)
    assert model_text(first)["data"]["value"] == 42
    assert "did not arrive whole" in model_text(second)["message"]


# --- item 15: a cut or empty reply is not an answer ------------------------------------------


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (RawReply(text="The answer is", cut=True), "cut off.* after 13 characters"),
        (RawReply(no_choices=True), "no choices"),
    ],
    ids=["cut-text", "no-choices"],
)
async def test_a_reply_that_did_not_end_is_an_error_and_the_session_goes_on(reply, error):
    with OpenAICompatibleServer([reply, "Hello again."], strict=True) as server:
        session = session_on(server)
        with pytest.raises(IncompleteReplyError, match=error):
            await session.run("hello")
        result = await session.run("are you there?")

    assert result.answer == "Hello again."
    assert [m.text for m in await session.history() if isinstance(m, AIMessage)] == ["Hello again."]


# --- item 11: malformed calls get an error under a valid id; the history stays valid ---------


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("null", "are null, not a JSON object"),
        ("[1, 2]", "are a list, not a JSON object"),
        ('"6*7"', "are a string, not a JSON object"),
        ('{"expression": 6*7}', "not valid JSON"),
        (None, "expression: Field required"),  # a null field is no arguments: validated as such
    ],
    ids=["null", "list", "string", "not-json", "json-null-field"],
)
async def test_arguments_that_are_not_an_object_are_answered_with_an_error(arguments, problem):
    bad = RawReply(tool_calls=[RawToolCall("calculator", arguments)])
    with OpenAICompatibleServer([bad, "Sorry.", "Still here."], strict=True) as server:
        session = session_on(server)
        first = await session.run("compute")
        second = await session.run("and now?")

    assert [(c.name, c.status) for c in first.tool_calls] == [("calculator", "failure")]
    (reply,) = tool_replies(server, 1)
    assert problem in model_text(reply)["message"]
    assert second.answer == "Still here.", "the strict server took the history"


@pytest.mark.parametrize(
    "ids", [[""], [None], ["call_same", "call_same"]], ids=["empty", "missing", "duplicate"]
)
async def test_calls_without_a_usable_id_run_under_a_new_one(ids):
    calls = [RawToolCall("calculator", '{"expression": "6*7"}', id=call_id) for call_id in ids]
    with OpenAICompatibleServer([RawReply(tool_calls=calls), "42.", "Yes."], strict=True) as server:
        session = session_on(server)
        first = await session.run("compute")
        second = await session.run("sure?")

    assert [c.status for c in first.tool_calls] == ["success"] * len(ids)
    assert second.answer == "Yes."
    sent = server.requests[2]["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"]
    call_ids = [c["id"] for m in assistant for c in m.get("tool_calls") or []]
    assert len(set(call_ids)) == len(ids) and all(call_ids)
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == call_ids


async def test_a_history_broken_before_is_sent_mended():
    """A session an earlier version broke (unanswered, unparsed, id-less calls) works again."""
    with OpenAICompatibleServer(["Back again."], strict=True) as server:
        session = session_on(server)
        broken = [
            HumanMessage("hi", id="h1"),
            AIMessage(
                content="",
                id="a1",
                tool_calls=[{"name": "calculator", "args": {"expression": "1"}, "id": ""}],
                invalid_tool_calls=[
                    {"name": "calculator", "args": "null", "id": "c2", "error": None}
                ],
            ),
            ToolMessage("{}", tool_call_id="a-request-id", id="t1"),
            AIMessage("Done.", id="a2"),
        ]
        await session.graph.aupdate_state(session.config, {"messages": broken}, as_node=MODEL_NODE)
        result = await session.run("hello?")

    assert result.answer == "Back again."
    assert history_problem(server.requests[0]) is None


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_calls_of_a_reply_that_was_not_streamed_are_checked_too(scripted):
    odd = AIMessage(
        content="",
        tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": ""}],
        invalid_tool_calls=[{"name": "add", "args": "[1]", "id": "x", "error": None}],
    )
    model = scripted(odd, "Three, and one call was odd.")
    result = await make_session(model, [add]).run("add")

    assert [c.status for c in result.tool_calls] == ["success", "failure"]
    request, *answers = model.received[1][-3:]
    assert [c["id"] for c in request.tool_calls] == [a.tool_call_id for a in answers]
    assert all(c["id"] for c in request.tool_calls) and not request.invalid_tool_calls
    assert "are a list, not a JSON object" in answers[1].text


# --- item 12: huge names and arguments are bounded before rendering or parsing ---------------


async def test_a_huge_tool_name_is_refused_and_never_shown_whole():
    events = EventLog()
    huge = RawReply(tool_calls=[RawToolCall("x" * 100_000, "{}")])
    with OpenAICompatibleServer([huge, "No such tool.", "Fine."], strict=True) as server:
        session = session_on(server)
        result = await session.run("go", on_event=events)
        await session.run("ok?")

    (call,) = result.tool_calls
    assert call.status == "failure" and len(call.name) <= 64
    assert all(len(e["tool"]) <= 64 for e in events if e["kind"] == "tool")
    (reply,) = tool_replies(server, 1)
    assert "The name of this call ran past 256 characters" in model_text(reply)["message"]
    assert len(str(reply["content"])) < 2_000


@pytest.mark.parametrize("total", [1_000_000, 10_000_000], ids=["1MB", "10MB"])
async def test_oversized_arguments_are_not_read(total: int):
    arguments = '{"expression": "' + "1" * total + '"}'
    # Pieces LangChain's client parses at once: its own cost per piece is not under test.
    flood = RawReply(tool_calls=[RawToolCall("calculator", arguments)], piece_chars=4_000)
    with OpenAICompatibleServer([flood, "That was too much."], strict=True) as server:
        result = await session_on(server).run("add them all")

    assert [c.status for c in result.tool_calls] == ["failure"]
    (reply,) = tool_replies(server, 1)
    assert "The arguments of this call ran past 100000 characters" in str(reply["content"])
    assert result.answer == "That was too much."


def test_a_long_or_hostile_tool_name_is_shown_as_one_short_line():
    err = io.StringIO()
    plain = {"force_terminal": False, "width": 200}
    render = TurnRenderer(out=Console(file=io.StringIO(), **plain), err=Console(file=err, **plain))
    for name in ("y" * 100_000, "evil\x1b[2J\x00name"):
        render({  # type: ignore[arg-type]
            "kind": "tool", "phase": ToolPhase.COMPLETED, "tool": name, "index": 1, "total": 1,
            "request_id": "r", "parent_request_id": None, "status": "failure", "depth": 0,
        })
    long_line, hostile_line = err.getvalue().splitlines()
    assert len(long_line) < 100 and long_line.endswith("… (1/1): failure")
    assert "\x1b" not in hostile_line and "\x00" not in hostile_line


# --- item 11 with storage: NUL anywhere, and a very long message, are stored -----------------


def storage_settings(database_url: str, tmp_path: Path, server: OpenAICompatibleServer) -> Settings:
    return load_settings(
        database_url=database_url, data_dir=tmp_path, sub_graphs_dir=tmp_path / "none",
        embeddings="none", openai_base_url=server.base_url, **MODEL,
    )


async def stored_contents(storage: Storage, user: str, session_id: str) -> list[str]:
    async with storage.database.user_transaction(user) as connection:
        rows = await connection.execute(
            text("SELECT content FROM messages WHERE session_id = :s ORDER BY id"),
            {"s": session_id},
        )
        return [row[0] for row in rows]


async def test_nul_from_the_user_the_model_and_a_tool_call_is_stored_and_the_session_goes_on(
    tmp_path: Path, database_url: str
):
    user, session_id = f"nul-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:12]
    calls = [
        RawToolCall("calc\x00ulator", '{"expression": "1+1"}'),
        RawToolCall("calculator", '{"expression": "1+1\\u0000"}'),
    ]
    script = [RawReply(tool_calls=calls), "Done\x00 here.", "Still here."]
    with OpenAICompatibleServer(script, strict=True) as server:
        settings = storage_settings(database_url, tmp_path, server)
        storage = await Storage.open(settings)
        try:
            runtime = Orchestrator.create(settings, storage=storage)
            session = runtime.session(user_id=user, session_id=session_id)
            first = await session.run("hello\x00 there")
            again = runtime.session(user_id=user, session_id=session_id)
            assert await again.open() is False, "the session opens again"
            second = await again.run("and now?")
            stored = await stored_contents(storage, user, session_id)
        finally:
            await storage.close()

    assert first.answer == "Done\x00 here." and second.answer == "Still here."
    assert [c.status for c in first.tool_calls] == ["failure", "failure"]
    assert stored[0] == "hello there" and "Done here." in stored
    assert not any("\x00" in content for content in stored)


async def test_a_message_of_over_a_megabyte_is_stored(tmp_path: Path, database_url: str):
    """Passes once the `search` column indexes a bounded prefix (the migration of item 11)."""
    user, session_id = f"big-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:12]
    huge = " ".join(f"word{i}" for i in range(160_000))  # 1.35 MB of distinct words
    with OpenAICompatibleServer(["Long indeed.", "Yes."], strict=True) as server:
        settings = storage_settings(database_url, tmp_path, server)
        storage = await Storage.open(settings)
        try:
            runtime = Orchestrator.create(settings, storage=storage)
            await runtime.session(user_id=user, session_id=session_id).run(huge)
            again = runtime.session(user_id=user, session_id=session_id)
            assert await again.open() is False
            await again.run("long?")
            stored = await stored_contents(storage, user, session_id)
        finally:
            await storage.close()

    assert stored[0] == huge
