"""Tool calls a model wrote as text run as calls, at every level, streamed or not; other text stays."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from orchestrator.cli.render import TurnRenderer
from orchestrator.held_text import HeldText
from orchestrator.llm.text_calls import may_begin_call, read_text_calls
from orchestrator.runtime import Runtime
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer, RawReply
from orchestrator.testing.openai_server import RawToolCall, Reply
from orchestrator.turns import TurnEvent, TurnResult
from tests.tool_folders import write_folder

CALL = {"name": "echo_say", "arguments": {"text": "hi"}}
OTHER = {"name": "echo_say", "arguments": {"text": "ho"}}
AS_CALLS = {
    "bare": json.dumps(CALL),
    "fenced": "```json\n"
    + json.dumps({"name": "echo_say", "parameters": {"text": "hi"}})
    + "\n```",
    "tagged": f"I will repeat it.\n<tool_call>\n{json.dumps(CALL)}\n</tool_call>",
    "two-calls": f"<tool_call>{json.dumps(CALL)}</tool_call>\n<tool_call>{json.dumps(OTHER)}</tool_call>",
}
ECHOED = {"bare": ["hi"], "fenced": ["hi"], "tagged": ["hi"], "two-calls": ["hi", "ho"]}
AS_TEXT = {
    "not-offered": json.dumps({"name": "send_email", "arguments": {"to": "ann"}}),
    "near-miss": '{"name": "echo_say", "arguments": {"text": "hi"}',
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


def agent_folder(root: Path) -> None:
    """A YAML-only agent `parrot` (on its parent's model) over the echo tool."""
    folder = root / "parrot"
    folder.mkdir(parents=True)
    config = {
        "name": "parrot",
        "description": "Repeats things.",
        "version": "1.0",
        "kind": "agent",
        "instructions": "You are {name}. Repeat what you are asked to with your echo tool.",
    }
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))
    write_folder(root, "parrot/src/sub_graphs/echo")


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


async def run_top(tmp_path: Path, replies: list[Reply], *, streaming: bool, **settings: object):
    root = tmp_path / "sub_graphs"
    write_folder(root, "echo")
    events: list[TurnEvent] = []
    with OpenAICompatibleServer(replies) as server:
        options = settings_for(server, root, model_streaming=streaming, **settings)
        runtime = Runtime.create(options, checkpointer=InMemorySaver(), ask=approve_all)
        result = await runtime.session(user_id="u").run("repeat hi", on_event=events.append)
    return result, server, events


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
    shown = "".join(e["text"] for e in events if e["kind"] == "token")
    assert "echo_say" not in shown and shown.endswith("Done.")


@pytest.mark.parametrize("streaming", STREAMING)
@pytest.mark.parametrize("form", list(AS_TEXT))
async def test_other_text_stays_the_answer(tmp_path: Path, form: str, streaming: bool):
    result, server, _ = await run_top(tmp_path, [AS_TEXT[form]], streaming=streaming)

    assert result.answer == AS_TEXT[form] and result.tool_calls == []
    assert len(server.requests) == 1


async def test_the_setting_off_leaves_a_call_written_as_text_as_the_answer(tmp_path: Path):
    result, server, _ = await run_top(
        tmp_path, [AS_CALLS["bare"]], streaming=True, text_tool_calls=False
    )

    assert result.answer == AS_CALLS["bare"] and result.tool_calls == []


@pytest.mark.parametrize("streaming", STREAMING)
@pytest.mark.parametrize("form", [*AS_CALLS, *AS_TEXT])
async def test_inside_a_nested_agent(tmp_path: Path, form: str, streaming: bool):
    root = tmp_path / "sub_graphs"
    agent_folder(root)
    ask = RawReply(tool_calls=[RawToolCall.of("parrot_ask", {"request": "repeat hi"})])
    calls = form in AS_CALLS
    agent = [AS_CALLS[form], "I repeated it."] if calls else [AS_TEXT[form]]
    with OpenAICompatibleServer([ask, *agent, "The parrot answered."]) as server:
        options = settings_for(server, root, model_streaming=streaming)
        runtime = Runtime.create(options, checkpointer=InMemorySaver(), ask=approve_all)
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


async def test_the_terminal_shows_the_prose_before_a_call_and_the_answer_once(tmp_path: Path):
    result, _, events = await run_top(tmp_path, [AS_CALLS["tagged"], "Done."], streaming=True)

    assert rendered(events, result) == "I will repeat it.\nDone.\n"


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
    shown = "".join(e["text"] for e in events if e["kind"] == "token")
    assert shown.startswith("Here is the code:\n```python\nprint('hi')\n")


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
    ],
)
def test_more_forms_read_as_calls(text: str):
    found = read_text_calls(text, tool_names=NAMES)

    assert found is not None and {c.name for c in found.calls} <= NAMES
    assert all(c.id.startswith("call_") for c in found.calls)


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
    ],
)
def test_text_that_is_no_call_stays_text(text: str):
    assert read_text_calls(text, tool_names=NAMES) is None


def test_held_text_is_released_as_soon_as_it_cannot_be_a_call():
    held = HeldText()
    pieces = ["Sum: ", "{a", " + b}\n", "```", "python\n", "x = 1\n", "<", "b>bold</b>"]

    shown = "".join(held.feed(piece, message_id="m") for piece in pieces)

    assert shown == "".join(pieces)
    assert not may_begin_call("```jsx") and may_begin_call("```js") and may_begin_call("<tool")


def test_held_text_is_dropped_when_the_reply_ends_and_a_new_reply_starts_afresh():
    held = HeldText()
    assert held.feed('Calling.\n{"name": "echo_say", ', message_id="m1") == "Calling.\n"
    assert held.feed('"arguments": {}}', message_id="m1") == ""
    held.end_reply()
    assert held.feed("{a}", message_id="m2") == "{a}"
