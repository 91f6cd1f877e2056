"""A chat model that plays back a script, for tests of graphs and sessions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field, SkipValidation

from orchestrator.errors import ScriptExhaustedError

Step = str | AIMessage | Callable[[list[BaseMessage]], str | AIMessage]


def call_tools(*calls: tuple[str, dict[str, object]]) -> AIMessage:
    """A step that calls tools, e.g. `call_tools(("add", {"a": 1, "b": 2}))`."""
    return AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}"}
            for name, args in calls
        ],
    )


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next step: a text, an AIMessage, or a function of the input.

    Every call's input is kept in `received`. `assert_complete()` fails while
    steps are left; a call past the end of the script fails at once.
    """

    steps: SkipValidation[list[Step]] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)
    model: str = "scripted"  # what traces name it

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[BaseTool | type[BaseModel] | Callable[..., object] | dict[str, object]],
        *,
        tool_choice: str | None = None,
        **kwargs: object,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind the tools' schemas as a real model does, and keep their names in `bound_tools`.

        The binding wraps this very instance, so `steps` and `received` stay
        shared with the test.
        """
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        self.bound_tools = [schema["function"]["name"] for schema in schemas]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=schemas, **kwargs)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: object) -> LangSmithParams:
        # The base class reads the model name (a per-call `model` first) and limits;
        # its provider, from the class name, would read "scriptedchatmodel".
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "scripted"
        return params

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: object,
    ) -> ChatResult:
        self.received.append(list(messages))
        if not self.steps:
            raise ScriptExhaustedError(
                f"ScriptedChatModel called {len(self.received)} times; the script had "
                f"{len(self.received) - 1} steps"
            )
        step = self.steps.pop(0)
        reply = step(messages) if callable(step) else step
        message = AIMessage(content=reply) if isinstance(reply, str) else reply
        return ChatResult(generations=[ChatGeneration(message=message)])

    def assert_complete(self) -> None:
        """Fail if any scripted step was never used."""
        if self.steps:
            raise AssertionError(f"{len(self.steps)} scripted step(s) never used: {self.steps!r}")
