"""Wires the settings into a model, tools and a compiled graph, and opens sessions on it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from orchestrator.graph.builder import build_agent_graph
from orchestrator.llm.offline import OfflineChatModel
from orchestrator.llm.providers import build_chat_model
from orchestrator.session import Session
from orchestrator.settings import Settings
from orchestrator.tools.builtin import builtin_tools

# Sync LangChain tools run on the loop's default executor; the stock one has only
# cpu_count + 4 threads, which would serialise a turn's tool calls on a small machine.
TOOL_THREADS = 32


@dataclass(frozen=True)
class Runtime:
    """Everything a process needs to hold conversations."""

    settings: Settings
    model: BaseChatModel
    tools: list[BaseTool]
    graph: CompiledStateGraph

    @classmethod
    def create(
        cls,
        settings: Settings,
        *,
        model: BaseChatModel | None = None,
        tools: list[BaseTool] | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
    ) -> Runtime:
        """Build from settings; `model`, `tools` and `checkpointer` replace the defaults."""
        model = model or build_chat_model(settings)
        tools = builtin_tools() if tools is None else tools
        graph = build_agent_graph(
            model=model,
            tools=tools,
            max_iterations=settings.max_tool_iterations,
            max_result_chars=settings.max_tool_result_chars,
            checkpointer=checkpointer or InMemorySaver(),
        )
        return cls(settings=settings, model=model, tools=tools, graph=graph)

    @property
    def offline(self) -> bool:
        """True when the built-in offline model stands in for a real one."""
        return isinstance(self.model, OfflineChatModel)

    def session(self, *, user_id: str, session_id: str | None = None) -> Session:
        """Open (or continue, with a known `session_id`) a conversation."""
        return Session(
            graph=self.graph, settings=self.settings, user_id=user_id, session_id=session_id
        )


def use_tool_threads(threads: int = TOOL_THREADS) -> None:
    """Give the running loop enough threads for a turn's sync tool calls to overlap."""
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tool")
    asyncio.get_running_loop().set_default_executor(executor)
