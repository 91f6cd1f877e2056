"""A chat model built at its first use, for commands that may never call one.

`run --json` calls no model unless its action is an agent's, and which folder
is an agent is known only once it is imported. Building the configured model
costs a second (LangChain's `init_chat_model`, the provider's package and its
SDK, the price table): `DeferredChatModel` stands in for it until something
calls it, and builds it once then. What reads a model's identity (its name,
context window, output cap, client) reads `resolved(model)`: the graph does so
at the first call of its model node (see `graph.builder.ModelNode`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import PrivateAttr


class DeferredChatModel(BaseChatModel):
    """The model `build` returns, built when it is first called, bound or asked about.

    Building is once per instance, under a lock; an error building it (a
    `ConfigError` for a model LangChain cannot make) is raised at each use.
    """

    build: Callable[[], BaseChatModel]
    _built: BaseChatModel | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def built(self) -> bool:
        """Whether the model was built already."""
        return self._built is not None

    def resolve(self) -> BaseChatModel:
        """The model, built now if it was not."""
        with self._lock:
            if self._built is None:
                self._built = self.build()
            return self._built

    @property
    def _llm_type(self) -> str:
        return "deferred"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Only reached through BaseChatModel's own plumbing (`generate`); `invoke` and
        # the rest below hand the call to the built model whole, its callbacks its own.
        return self.resolve()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        return self.resolve().invoke(input, config, stop=stop, **kwargs)

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        return await self.resolve().ainvoke(input, config, stop=stop, **kwargs)

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        yield from self.resolve().stream(input, config, stop=stop, **kwargs)

    async def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        async for chunk in self.resolve().astream(input, config, stop=stop, **kwargs):
            yield chunk

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.resolve().bind_tools(tools, tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        return self.resolve().with_structured_output(schema, include_raw=include_raw, **kwargs)


def resolved(model: BaseChatModel) -> BaseChatModel:
    """`model` itself, or the model a `DeferredChatModel` stands in for, built now."""
    return model.resolve() if isinstance(model, DeferredChatModel) else model
