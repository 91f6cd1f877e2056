"""Tool calls a model wrote as text run as calls, at every level, streamed or not; other text stays."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from orchestrator.conversation.held_text import HeldText
from orchestrator.conversation.turns import TurnEvent, TurnResult
from orchestrator.events import Stage
from orchestrator.graph.builder import STOPPED
from orchestrator.graph.calls import SAFE_ID
from orchestrator.graph.prompts import ITERATION_LIMIT
from orchestrator.llm.reply import RawCall
from orchestrator.llm.reply import Reply as ModelReply
from orchestrator.llm.text_calls import may_begin_call, read_text_calls, with_text_calls
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.terminal.render import TurnRenderer
from orchestrator.testing import OpenAICompatibleServer, RawReply
from orchestrator.testing.openai_server import RawToolCall, Reply
from orchestrator.tools import ToolResult
from tests.tool_folders import parrot_agent

CALL = {"name": "echo_say", "arguments": {"text": "hi"}}
PROSE = "I will repeat it.\n"
OTHER = {"name": "echo_say", "arguments": {"text": "ho"}}
AS_CALLS = {
    "bare": json.dumps(CALL),
    "fenced": "```json\n"
    + json.dumps({"name": "echo_say", "parameters": {"text": "hi"}})
    + "\n```",
    "tagged": f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>\n",
    "two-calls": f"<tool_call>{json.dumps(CALL)}</tool_call>\n<tool_call>{json.dumps(OTHER)}</tool_call>",
}
ECHOED = {"bare": ["hi"], "fenced": ["hi"], "tagged": ["hi"], "two-calls": ["hi", "ho"]}
AS_TEXT = {
    "not-offered": json.dumps({"name": "send_email", "arguments": {"to": "ann"}}),
    "near-miss": '{"name": "echo_say", "arguments": {"text": "hi"}',
    # A call the model only shows, with words beside it, is not one it makes.
    "quoted-tag": f"For reference, do not run:\n<tool_call>{json.dumps(CALL)}</tool_call>",
    "quoted-fence": f"{PROSE}```json\n{json.dumps(CALL)}\n```\nThat is how it would look.",
}


def approve_all(folder: object, status: object) -> bool:
    return True


def settings_for(server: OpenAICompatibleServer, root: Path, **overrides: object):
    return load_settings(
        model="openai:small-model",
        openai_base_url=server.base_url,
        openai_api_key="test",
        model_max_retries=0,
        sub_graphs_dir=root,
        data_dir=root.parent / "data",
        **overrides,
    )


def echoed(server: OpenAICompatibleServer) -> list[str]:
    """What the echo tool said back to the model, in the requests after its calls."""
    said = []
    for request in server.requests:
        echo_ids = {
            call["id"]
            for message in request["messages"]
            for call in message.get("tool_calls") or []
            if call["function"]["name"] == "echo_say"
        }
        said += [
            json.loads(message["content"])["message"]
            for message in request["messages"]
            if message["role"] == "tool" and message["tool_call_id"] in echo_ids
        ]
    return list(dict.fromkeys(said))


@tool
def echo_say(text: str) -> ToolResult:
    """Repeat the text."""
    return ToolResult(message=text)


async def run_top(tmp_path: Path, replies: list[Reply], *, streaming: bool, **settings: object):
    events: list[TurnEvent] = []
    with OpenAICompatibleServer(replies) as server:
        root = tmp_path / "sub_graphs"
        options = settings_for(server, root, model_streaming=streaming, **settings)
        runtime = Orchestrator.create(options, checkpointer=InMemorySaver(), tools=[echo_say])
        result = await runtime.session(user_id="u").run("repeat hi", on_event=events.append)
    return result, server, events


def shown_per_reply(events: list[TurnEvent]) -> dict[str | None, str]:
    """The text the token events showed, per reply."""
    shown: dict[str | None, str] = {}
    for event in events:
        if event["kind"] == "token":
            shown[event["message_id"]] = shown.get(event["message_id"], "") + event["text"]
    return shown


STREAMING = [pytest.param(True, id="streamed"), pytest.param(False, id="whole")]


@pytest.mark.parametrize("streaming", STREAMING)
@pytest.mark.parametrize("form", list(AS_CALLS))
async def test_a_call_written_as_text_runs_at_the_top(tmp_path: Path, form: str, streaming: bool):
    result, server, events = await run_top(tmp_path, [AS_CALLS[form], "Done."], streaming=streaming)

    assert result.answer == "Done."
    assert [(c.name, c.status) for c in result.tool_calls] == [
        ("echo_say", "success") for _ in ECHOED[form]
    ]
    assert echoed(server) == ECHOED[form], "the model got the calls' results"
    asked = server.requests[1]["messages"][-1 - len(ECHOED[form])]
    call_ids = [call["id"] for call in asked["tool_calls"]]
    assert all(SAFE_ID.fullmatch(i) and i.startswith("call_") for i in call_ids)
    shown = shown_per_reply(events)
    assert shown.pop(result.answer_id) == "Done.", "the answer shown once, whole"
    assert list(shown.values()) == []


@pytest.mark.parametrize("streaming", STREAMING)
@pytest.mark.parametrize("form", list(AS_TEXT))
async def test_other_text_stays_the_answer(tmp_path: Path, form: str, streaming: bool):
    result, server, events = await run_top(tmp_path, [AS_TEXT[form]], streaming=streaming)

    assert result.answer == AS_TEXT[form] and result.tool_calls == []
    assert len(server.requests) == 1
    assert shown_per_reply(events) == {result.answer_id: AS_TEXT[form]}, "held, then shown once"


async def test_the_setting_off_leaves_a_call_written_as_text_as_the_answer(tmp_path: Path):
    reply = RawReply(text=AS_CALLS["bare"], piece_chars=3)
    result, server, events = await run_top(tmp_path, [reply], streaming=True, text_tool_calls=False)

    assert result.answer == AS_CALLS["bare"] and result.tool_calls == []
    tokens = [e for e in events if e["kind"] == "token"]
    assert len(tokens) > 1 and "".join(e["text"] for e in tokens) == AS_CALLS["bare"], "not held"


@pytest.mark.parametrize("streaming", STREAMING)
@pytest.mark.parametrize("form", [*AS_CALLS, *AS_TEXT])
async def test_inside_a_nested_agent(tmp_path: Path, form: str, streaming: bool):
    root = tmp_path / "sub_graphs"
    parrot_agent(root)
    ask = RawReply(tool_calls=[RawToolCall.of("parrot_ask", {"request": "repeat hi"})])
    calls = form in AS_CALLS
    agent = [AS_CALLS[form], "I repeated it."] if calls else [AS_TEXT[form]]
    with OpenAICompatibleServer([ask, *agent, "The parrot answered."]) as server:
        options = settings_for(server, root, model_streaming=streaming)
        runtime = Orchestrator.create(options, checkpointer=InMemorySaver(), ask=approve_all)
        result = await runtime.session(user_id="u").run("make the parrot repeat hi")

    assert result.answer == "The parrot answered."
    told = json.loads(server.requests[-1]["messages"][-1]["content"])
    if calls:
        assert echoed(server) == ECHOED[form]
        assert told["message"] == "I repeated it." and told["data"]["tool_calls"] == [
            "echo_say" for _ in ECHOED[form]
        ]
    else:
        assert told["message"] == AS_TEXT[form] and told["data"]["tool_calls"] == []


# --- what the terminal shows ------------------------------------------------------------------


def rendered(events: list[TurnEvent], result: TurnResult) -> str:
    out = io.StringIO()
    renderer = TurnRenderer(out=Console(file=out), err=Console(file=io.StringIO()))
    for event in events:
        renderer(event)
    renderer.finish(result)
    return out.getvalue()


async def test_the_terminal_shows_a_quoted_call_as_the_answer_once(tmp_path: Path):
    result, server, events = await run_top(tmp_path, [AS_TEXT["quoted-tag"]], streaming=True)

    assert rendered(events, result) == AS_TEXT["quoted-tag"] + "\n"
    assert len(server.requests) == 1, "nothing ran"


ANSWER_WITH_CODE = (
    "Here is the code:\n```python\nprint('hi')\n```\nAnd its config:\n```json\n"
    '{"name": "hi"}\n```\nThat is all.'
)


@pytest.mark.parametrize("streaming", STREAMING)
async def test_an_answer_with_code_and_json_is_shown_whole_once(tmp_path: Path, streaming: bool):
    reply = RawReply(text=ANSWER_WITH_CODE, piece_chars=3)
    result, _, events = await run_top(tmp_path, [reply], streaming=streaming)

    assert result.answer == ANSWER_WITH_CODE
    assert rendered(events, result) == ANSWER_WITH_CODE + "\n"
    assert shown_per_reply(events) == {result.answer_id: ANSWER_WITH_CODE}
    shown = "".join(e["text"] for e in events if e["kind"] == "token" and e["message_id"])
    assert shown.startswith("Here is the code:\n```python\nprint('hi')\n")


async def test_the_python_code_streams_before_the_reply_ends(tmp_path: Path):
    reply = RawReply(text=ANSWER_WITH_CODE, piece_chars=3)
    _, _, events = await run_top(tmp_path, [reply], streaming=True)

    complete = next(i for i, e in enumerate(events) if e.get("stage") == Stage.COMPLETE)
    *streamed, released = [e["text"] for e in events[:complete] if e["kind"] == "token"]
    assert "".join(streamed) == "Here is the code:\n```python\nprint('hi')\n```\nAnd its config:\n"
    assert len(streamed) > 10, "the code streamed in pieces"
    assert released == '```json\n{"name": "hi"}\n```\nThat is all.', "held until the reply ended"
    assert events[complete - 1]["kind"] == "token"


async def test_a_call_written_as_text_at_the_tool_round_limit_is_not_shown(tmp_path: Path):
    replies = [AS_CALLS["bare"], RawReply(text=json.dumps(OTHER), piece_chars=4)]
    result, server, events = await run_top(
        tmp_path, replies, streaming=True, max_tool_iterations=1
    )

    assert result.answer == ITERATION_LIMIT.format(limit=1)
    assert echoed(server) == ["hi"], "the call past the limit did not run"
    assert "echo_say" not in "".join(shown_per_reply(events).values())
    assert rendered(events, result) == result.answer + "\n"


# --- the pieces -------------------------------------------------------------------------------

NAMES = frozenset({"echo_say", "calculator"})


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "function", "function": {"name": "calculator", "arguments": "{\\"e\\": 1}"}}',
        '[{"name": "echo_say", "arguments": {}}, {"name": "calculator", "parameters": {}}]',
        '{"name": "echo_say", "arguments": {}}\n{"name": "calculator", "arguments": {}}',
        '```json{"name": "calculator", "arguments": {"e": 1}}```',
        '```\n{"name": "calculator", "arguments": {"e": 1}}\n```',
        '```JSON\n{"name": "calculator", "arguments": null}\n```',
        '<tool_call>\n```json\n{"name": "calculator", "arguments": {}}\n```\n</tool_call>',
        '<tool_call>\n{"name": "calculator", "arguments": {}}',  # the model stopped at its call
        '{"type": "function", "name": "echo_say", "parameters": {"text": "x"}}',
    ],
)
def test_more_forms_read_as_calls(text: str):
    found = read_text_calls(text, tool_names=NAMES)

    assert found is not None and {c.name for c in found} <= NAMES
    assert all(c.id.startswith("call_") for c in found)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The tool is called echo_say.",
        'Try {"name": "echo_say", "arguments": {}} yourself.',  # a bare object inside prose
        '{"name": "echo_say", "arguments": {}, "reason": "why"}',  # not only a call's keys
        '{"name": "echo_say", "arguments": "not json"}',
        '```json\n{"name": "echo_say", "arguments": {}}\n```\n```json\n{"a": 1}\n```',
        '<tool_call>{"name": "echo_say"</tool_call>',
        '[{"name": "echo_say", "arguments": {}}, 3]',
        '{"name": "echo_say", "type": "object"}',  # a schema, not a call
        '```python\nprint(1)\n```\n```json\n{"name": "echo_say", "arguments": {}}\n```',
        '<tool_call>{"name": "echo_say", "arguments": {}}</tool_call><tool_call>{"name": "x"}',
        # words beside a call: the model shows it, it does not make it
        'For reference, do not run:\n<tool_call>{"name": "echo_say", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "echo_say", "arguments": {}}</tool_call>\nThat is the call.',
        'Like this:\n```json\n{"name": "calculator", "arguments": {}}\n```',
    ],
)
def test_text_that_is_no_call_stays_text(text: str):
    assert read_text_calls(text, tool_names=NAMES) is None


def test_a_converted_reply_keeps_its_id_and_no_text(caplog: pytest.LogCaptureFixture):
    text = f"\n```json\n{json.dumps(CALL)}\n```\n  \n```\n{json.dumps(OTHER)}\n```\n"
    reply = ModelReply(AIMessage(text, id="run-1"), [], "stop")

    with caplog.at_level(logging.DEBUG, logger="orchestrator.llm.text_calls"):
        converted = with_text_calls(reply, tool_names=NAMES)

    assert converted.message.id == "run-1" and converted.message.content == ""
    assert [(c.name, c.args) for c in converted.calls] == [
        ("echo_say", {"text": "hi"}),
        ("echo_say", {"text": "ho"}),
    ]
    assert converted.calls[0].id != converted.calls[1].id
    assert "read 2 tool call(s)" in caplog.text


def test_a_reply_with_calls_or_no_offered_tools_is_left_alone():
    text = json.dumps(CALL)
    call = RawCall(name="calculator", id="c1", arguments="{}")
    with_call = ModelReply(AIMessage(text), [call], "tool_calls")

    assert with_text_calls(with_call, tool_names=NAMES) is with_call
    assert read_text_calls(text, tool_names=frozenset()) is None


def test_held_text_is_released_as_soon_as_it_cannot_be_a_call():
    held = HeldText()
    pieces = ["Sum: ", "{a", " + b}\n", "```", "python\n", "x = 1\n", "<", "b>bold</b>"]

    shown = "".join(held.feed(piece, message_id="m") for piece in pieces)

    assert shown == "".join(pieces)
    assert not may_begin_call("```jsx") and may_begin_call("```js") and may_begin_call("<tool")


def status(stage: Stage, detail: str = "") -> TurnEvent:
    return {"kind": "status", "stage": stage, "detail": detail}


def token(text: str, message_id: str = "m") -> TurnEvent:
    return {"kind": "token", "text": text, "message_id": message_id}


def test_held_text_is_shown_when_the_reply_is_the_answer_and_dropped_when_it_is_calls():
    held = HeldText()
    assert held.filter(token('Calling.\n{"name": "echo_say", ')) == [token("Calling.\n")]
    assert held.filter(token('"arguments": {}}')) == []
    assert held.filter(status(Stage.EXECUTING)) == [status(Stage.EXECUTING)]
    assert held.filter(token('{"a": 1}', "m2")) == []
    assert held.filter(status(Stage.COMPLETE)) == [token('{"a": 1}', "m2"), status(Stage.COMPLETE)]
    assert held.filter(token("{a}", "m3")) == [token("{a}", "m3")], "a new reply starts afresh"


@pytest.mark.parametrize("end", [status(Stage.ERROR, "APIError"), status(Stage.COMPLETE, STOPPED)])
def test_held_text_is_dropped_when_the_reply_fails_or_a_stop_replaces_it(end: TurnEvent):
    held = HeldText()
    assert held.filter(token("<tool_call>{")) == []
    assert held.filter(end) == [end]
    assert held.release() == []


def test_held_text_of_a_reply_left_without_a_stage_is_not_shown_with_the_next():
    held = HeldText()
    assert held.filter(token("```json\n{")) == []
    assert held.filter(token("Hello", "m2")) == [token("Hello", "m2")]
    assert held.release() == []
