"""Arguments with JSON-schema words beside the real ones, as small models write them."""

from __future__ import annotations

import logging

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, ConfigDict

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import call_tools
from tests.tool_folders import ECHO_TOOL, write_folder

received: list[dict[str, object]] = []


class TimeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timezone: str


@tool(args_schema=TimeArgs)
def current_time(timezone: str) -> str:
    """The time in a timezone."""
    received.append({"timezone": timezone})
    return f"12:00 in {timezone}"


class KindArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str


@tool(args_schema=KindArgs)
def animal(type: str) -> str:  # noqa: A002 (the parameter the model sees)
    """Describe an animal of a kind."""
    received.append({"type": type})
    return f"a {type}"


def _lookup(**arguments: object) -> str:
    received.append(dict(arguments))
    return "found"


# Described by a JSON schema only, as an MCP tool is.
lookup = StructuredTool.from_function(
    func=_lookup,
    name="lookup",
    description="Look a word up.",
    args_schema={
        "type": "object",
        "properties": {"word": {"type": "string"}},
        "required": ["word"],
        "additionalProperties": False,
    },
)


async def run(scripted, tools: list[BaseTool], arguments: dict[str, object]) -> list[ToolMessage]:
    """The tool messages of a turn that calls the first of `tools` with `arguments`."""
    received.clear()
    model = scripted(call_tools((tools[0].name, arguments)), "done")
    runtime = Orchestrator.create(
        load_settings(), model=model, tools=tools, checkpointer=InMemorySaver()
    )
    return await tool_messages(runtime)


async def tool_messages(runtime: Orchestrator) -> list[ToolMessage]:
    session = runtime.session(user_id="u1")
    await session.run("go")
    return [m for m in await session.history() if isinstance(m, ToolMessage)]


SCHEMA_WORDS = {"type": "object", "required": ["timezone"], "properties": {"timezone": {}}}


async def test_schema_words_beside_valid_arguments_are_dropped(scripted, caplog):
    with caplog.at_level(logging.DEBUG, logger="orchestrator.dispatch.validate"):
        [answer] = await run(scripted, [current_time], {"timezone": "Asia/Tokyo", **SCHEMA_WORDS})

    assert answer.status == "success"
    assert received == [{"timezone": "Asia/Tokyo"}]
    assert "dropped schema words ['type', 'required', 'properties']" in caplog.text


async def test_the_rest_must_still_validate(scripted):
    [answer] = await run(scripted, [current_time], {"zone": "UTC", "type": "object"})

    assert answer.status == "error" and received == []
    assert "Invalid arguments for current_time" in answer.text and "timezone" in answer.text


async def test_a_declared_parameter_named_type_is_kept(scripted):
    [answer] = await run(scripted, [animal], {"type": "cat", "required": ["type"]})

    assert answer.status == "success"
    assert received == [{"type": "cat"}]


async def test_other_unknown_keys_stay_an_error(scripted):
    [answer] = await run(scripted, [current_time], {"timezone": "UTC", "colour": "red"})

    assert answer.status == "error" and received == []
    assert "colour" in answer.text


async def test_a_json_schema_tool_gets_only_its_parameters(scripted):
    [answer] = await run(
        scripted, [lookup], {"word": "tea", "type": "object", "required": ["word"]}
    )

    assert answer.status == "success"
    assert received == [{"word": "tea"}]


STRICT_ECHO = ECHO_TOOL.replace(
    "class SayParams(BaseModel):",
    "class SayParams(BaseModel):\n    model_config = {'extra': 'forbid'}",
)


async def test_a_folder_tools_action_gets_its_parameters_without_schema_words(scripted, tmp_path):
    write_folder(tmp_path / "sub_graphs", "echo", code=STRICT_ECHO)
    settings = load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")
    model = scripted(call_tools(("echo_say", {"text": "hi", "times": 2, "type": "object"})), "done")
    runtime = Orchestrator.create(settings, model=model, checkpointer=InMemorySaver(), ask=approve)

    [answer] = await tool_messages(runtime)

    assert answer.status == "success" and "hi hi" in answer.text


def approve(*_: object) -> bool:
    return True
