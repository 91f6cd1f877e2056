"""AI scope per parameter: what the model sees, what it may send, what the configuration fixes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
from langchain_core.messages import ToolCall
from pydantic import BaseModel, Field

from orchestrator.chain import compose
from orchestrator.dispatch.middleware import CallRequest
from orchestrator.dispatch.policy import ExecutionPolicy
from orchestrator.dispatch.scope_check import ScopeMiddleware
from orchestrator.folders.loader import ToolLoadError
from orchestrator.folders.scope import ActionScope, ParameterChoice, resolve_scopes, visible_model
from orchestrator.folders.tool_config import FixedValue, ToolConfigError, load_tool_config
from orchestrator.tools import NotAI, Tool, ToolRequest, ToolResult, action
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallRecord


class FetchParams(BaseModel):
    """Fetch one page of a paid service."""

    url: str = Field(description="The page to fetch.", pattern=r"^https://")
    pages: int = Field(default=1, ge=1, le=3, description="How many pages.")
    api_key: Annotated[str, NotAI] = Field(description="The service's key.")
    region: Annotated[str, NotAI] = "eu"


class SearchParams(BaseModel):
    query: str
    api_key: Annotated[str, NotAI]


class Fetcher(Tool):
    @action(FetchParams)
    async def fetch(self, params: FetchParams, request: ToolRequest) -> ToolResult:
        """Fetch a page."""
        return request.result(f"{params.url} with {params.api_key} in {params.region}")

    @action(SearchParams)
    async def search(self, params: SearchParams, request: ToolRequest) -> ToolResult:
        """Search the service."""
        return request.result(f"{params.query} with {params.api_key}")


class SayParams(BaseModel):
    text: str
    times: int = Field(default=1, ge=1, le=5)


class Echo(Tool):
    @action(SayParams)
    async def say(self, params: SayParams, request: ToolRequest) -> ToolResult:
        """Repeat the text."""
        return request.result(" ".join([params.text] * params.times))


KEY = {"api_key": FixedValue(value="secret-1")}


def fetcher() -> Fetcher:
    return Fetcher(name="fetcher", description="Fetches pages.")


def echo() -> Echo:
    return Echo(name="echo", description="Repeats.")


# --- what the model sees ---


def test_a_hidden_parameter_is_absent_from_the_schema_the_model_sees() -> None:
    scope = resolve_scopes(fetcher(), KEY)["fetch"]

    schema = scope.visible.model_json_schema()

    assert set(schema["properties"]) == {"url", "pages"}
    assert schema["required"] == ["url"]
    assert schema["description"] == "Fetch one page of a paid service."
    assert schema["properties"]["url"] == {
        "description": "The page to fetch.",
        "pattern": "^https://",
        "title": "Url",
        "type": "string",
    }
    assert schema["properties"]["pages"]["maximum"] == 3
    assert schema["properties"]["pages"]["default"] == 1
    assert scope.hidden == {"api_key", "region"}
    assert scope.fixed == {"api_key": "secret-1"}


def test_the_name_applies_to_every_action_that_has_the_parameter() -> None:
    scopes = resolve_scopes(fetcher(), KEY)

    assert set(scopes) == {"fetch", "search"}
    assert scopes["search"].fixed == {"api_key": "secret-1"}
    assert set(scopes["search"].visible.model_json_schema()["properties"]) == {"query"}


def test_a_fixed_value_hides_a_parameter_the_model_could_have_set() -> None:
    scope = resolve_scopes(echo(), {"times": FixedValue(value=2)})["say"]

    assert set(scope.visible.model_json_schema()["properties"]) == {"text"}
    assert scope.fixed == {"times": 2}


def test_ai_for_an_unmarked_parameter_changes_nothing() -> None:
    assert resolve_scopes(echo(), {"times": "ai"}) == {}


def test_a_tool_with_no_marked_parameters_and_no_choices_has_no_scopes() -> None:
    before = visible_model.cache_info().currsize

    assert resolve_scopes(echo(), {}) == {}
    assert visible_model.cache_info().currsize == before


def test_the_visible_schema_is_built_once_per_model_and_hidden_set() -> None:
    first = resolve_scopes(fetcher(), KEY)["fetch"].visible
    second = resolve_scopes(fetcher(), {"api_key": FixedValue(value="other")})["fetch"].visible

    assert first is second


# --- what the configuration may choose ---


def test_ai_for_a_parameter_its_author_marked_is_a_load_error() -> None:
    choices: dict[str, ParameterChoice] = {"api_key": "ai"}

    with pytest.raises(ToolLoadError) as raised:
        resolve_scopes(fetcher(), choices)

    message = str(raised.value)
    assert message.startswith("fetcher.fetch: parameter api_key may not be set by the model")
    assert "`api_key: ai`" in message


def test_a_parameter_no_action_has_is_a_load_error() -> None:
    with pytest.raises(ToolLoadError) as raised:
        resolve_scopes(echo(), {"colour": FixedValue(value="red")})

    assert str(raised.value) == (
        "echo: tool_config.yaml names parameter colour, which none of its actions has "
        "(its parameters: text, times)"
    )


def test_a_marked_parameter_without_a_value_or_default_is_a_load_error() -> None:
    with pytest.raises(ToolLoadError) as raised:
        resolve_scopes(fetcher(), {})

    assert str(raised.value) == (
        "fetcher.fetch: parameter api_key may not be set by the model and tool_config.yaml "
        "gives no value: add parameters: {api_key: {value: ...}}"
    )


@pytest.mark.parametrize(
    ("choices", "problem"),
    [
        ({"api_key": FixedValue(value=["a", "list"])}, "fetcher.fetch: tool_config.yaml's value "
         "for parameter api_key is invalid: value: Input should be a valid string"),
        ({"api_key": FixedValue(value="k"), "pages": FixedValue(value=9)}, "fetcher.fetch: "
         "tool_config.yaml's value for parameter pages is invalid: value: Input should be less "
         "than or equal to 3"),
    ],
)
def test_an_invalid_fixed_value_is_a_load_error(
    choices: dict[str, ParameterChoice], problem: str
) -> None:
    with pytest.raises(ToolLoadError) as raised:
        resolve_scopes(fetcher(), choices)

    assert str(raised.value) == problem


def test_a_marked_parameter_with_a_default_is_hidden_and_keeps_it() -> None:
    scope = resolve_scopes(fetcher(), KEY)["fetch"]

    assert "region" in scope.hidden
    assert "region" not in scope.fixed  # validation fills in the default


# --- what the model may send ---


@dataclass
class ScopedTool:
    """Stands in for the adapter's ActionTool: all the middleware reads is `scope`."""

    scope: ActionScope | None


class Recorder:
    """The rest of the pipeline: keeps each request it is handed."""

    def __init__(self) -> None:
        self.requests: list[CallRequest] = []

    async def __call__(self, request: CallRequest) -> ToolResult:
        self.requests.append(request)
        return ToolResult(request_id=request.record.request_id, message="ran")


def call_request(tool: ScopedTool | None, arguments: dict[str, object]) -> CallRequest:
    call = ToolCall(name="fetcher_fetch", args=arguments, id="call-1")
    record = CallRecord(
        request_id="req-1",
        parent_request_id="parent-1",
        session_id="s",
        user_id="u",
        tool="fetcher",
        action="fetch",
        call_name="fetcher_fetch",
        parameters=arguments,
    )
    return CallRequest(
        call=call,
        tool=tool,  # type: ignore[arg-type]
        context=RunContext(user_id="u"),
        record=record,
        policy=ExecutionPolicy(timeout_seconds=5),
        arguments=dict(arguments),
    )


async def test_a_model_that_sets_a_hidden_parameter_gets_an_error_naming_it() -> None:
    recorder = Recorder()
    handler = compose([ScopeMiddleware().awrap_tool_call], recorder)
    tool = ScopedTool(resolve_scopes(fetcher(), KEY)["fetch"])

    result = await handler(call_request(tool, {"url": "https://a", "api_key": "mine"}))

    assert recorder.requests == []
    assert result.status == "failure"
    assert result.error_code == "invalid_arguments"
    assert result.message.startswith(
        "fetcher_fetch does not take 'api_key' from the model: "
        "it is fixed by the tool's configuration"
    )
    assert (result.request_id, result.parent_request_id) == ("req-1", "parent-1")


async def test_every_hidden_parameter_the_model_set_is_named() -> None:
    recorder = Recorder()
    handler = compose([ScopeMiddleware().awrap_tool_call], recorder)
    tool = ScopedTool(resolve_scopes(fetcher(), KEY)["fetch"])

    result = await handler(call_request(tool, {"url": "https://a", "api_key": "k", "region": "us"}))

    assert recorder.requests == []
    assert "does not take 'api_key', 'region' from the model: they are fixed" in result.message


async def test_the_fixed_value_reaches_the_tool() -> None:
    tool = fetcher()
    scope = resolve_scopes(tool, KEY)["fetch"]

    async def run(request: CallRequest) -> ToolResult:
        call = ToolRequest(request_id="r", action="fetch", parameters=dict(request.arguments))
        return await tool.execute(call)

    handler = compose([ScopeMiddleware().awrap_tool_call], run)
    result = await handler(call_request(ScopedTool(scope), {"url": "https://a"}))

    assert result.status == "success"
    assert result.message == "https://a with secret-1 in eu"


async def test_the_model_arguments_gain_the_fixed_values() -> None:
    recorder = Recorder()
    handler = compose([ScopeMiddleware().awrap_tool_call], recorder)
    tool = ScopedTool(resolve_scopes(fetcher(), KEY)["fetch"])
    request = call_request(tool, {"url": "https://a"})

    await handler(request)

    assert recorder.requests[0].arguments == {"url": "https://a", "api_key": "secret-1"}
    assert request.arguments == {"url": "https://a"}  # the model's own request is unchanged


@pytest.mark.parametrize("tool", [ScopedTool(None), None])
async def test_a_tool_without_a_scope_passes_untouched(tool: ScopedTool | None) -> None:
    recorder = Recorder()
    handler = compose([ScopeMiddleware().awrap_tool_call], recorder)
    request = call_request(tool, {"url": "https://a", "api_key": "mine"})

    result = await handler(request)

    assert result.message == "ran"
    assert recorder.requests == [request]


# --- tool_config.yaml ---

BASE_CONFIG = "name: fetcher\ndescription: Fetches pages.\nversion: '1.0'\n"


def write_config(tmp_path: Path, parameters: str) -> Path:
    path = tmp_path / "tool_config.yaml"
    path.write_text(BASE_CONFIG + parameters)
    return path


def test_tool_config_reads_parameter_choices(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "parameters:\n  url: ai\n  api_key: {value: secret-1}\n  pages: {value: null}\n"
    )

    config = load_tool_config(path)

    assert config.parameters == {
        "url": "ai",
        "api_key": FixedValue(value="secret-1"),
        "pages": FixedValue(value=None),
    }


def test_tool_config_without_parameters_has_none(tmp_path: Path) -> None:
    assert load_tool_config(write_config(tmp_path, "")).parameters == {}


@pytest.mark.parametrize(
    ("parameters", "problem"),
    [
        ("parameters: {x: maybe}", "parameters.x: must be `ai` or `{value: ...}`"),
        ("parameters: {x: 3}", "parameters.x: must be `ai` or `{value: ...}`"),
        ("parameters: {x: {value: 1, other: 2}}", "parameters.x.value.other: Extra inputs"),
        ("parameters: {x: {}}", "parameters.x.value.value: Field required"),
        ("parameters: [x]", "parameters: Input should be a valid dictionary"),
    ],
)
def test_tool_config_rejects_a_bad_parameter_choice(
    tmp_path: Path, parameters: str, problem: str
) -> None:
    path = write_config(tmp_path, parameters)

    with pytest.raises(ToolConfigError) as raised:
        load_tool_config(path)

    assert str(raised.value).startswith(f"{path}: {problem}")
