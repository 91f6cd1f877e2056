"""Wires the settings into a model, tools and a compiled graph, and opens sessions on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from orchestrator.graph.builder import build_agent_graph
from orchestrator.llm.providers import build_chat_model
from orchestrator.redact import remember_settings
from orchestrator.session import Session
from orchestrator.settings import Settings
from orchestrator.store.search_tool import search_messages_tool
from orchestrator.store.storage import Storage
from orchestrator.tasks import TaskManager
from orchestrator.tools.approval import Ask, Reviewed, review_folders
from orchestrator.tools.builtin import builtin_tools
from orchestrator.tools.registry import LoadedTool, load_level

logger = logging.getLogger(__name__)

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
    sub_agents: list[LoadedTool]
    storage: Storage | None = None
    tasks: TaskManager = field(default_factory=TaskManager)

    @classmethod
    def create(
        cls,
        settings: Settings,
        *,
        ask: Ask | None = None,
        reviewed: Reviewed | None = None,
        storage: Storage | None = None,
        model: BaseChatModel | None = None,
        tools: list[BaseTool] | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
    ) -> Runtime:
        """Build from settings: the model, the built-in tools and the approved sub-agents.

        `ask` is put every new or changed tool folder (without it, none is
        approved now), unless `reviewed` holds the answers already. With `storage`, sessions are durable and archived, and
        the model gets RAG context; without, they live in memory. `model`,
        `tools` and `checkpointer` replace the defaults; given `tools`, no
        folder is discovered.
        """
        remember_settings(settings)  # errors shown to the model or the person hide its secrets
        model = model or build_chat_model(settings)
        database = storage.database if storage is not None else None
        sub_agents: list[LoadedTool] = []
        if tools is None:
            reviewed = reviewed or review_folders(settings, ask or _input_ended)
            sub_agents = load_level(
                reviewed.tree.nodes,
                reviewed.approved,
                model=model,
                settings=settings,
                database=database,
            )
            tools = [
                *builtin_tools(),
                *([search_messages_tool(storage.messages)] if storage is not None else []),
                *(t for loaded in sub_agents for t in loaded.langchain),
            ]
        graph = build_agent_graph(
            model=model,
            tools=tools,
            max_iterations=settings.max_tool_iterations,
            max_result_chars=settings.max_tool_result_chars,
            checkpointer=checkpointer or (storage.checkpointer if storage else InMemorySaver()),
            retriever=storage.retriever if storage is not None else None,
            tool_timeout_seconds=settings.tool_timeout_seconds,
            inline_budget_seconds=settings.inline_budget_seconds,
        )
        return cls(
            settings=settings,
            model=model,
            tools=tools,
            graph=graph,
            sub_agents=sub_agents,
            storage=storage,
        )

    def all_tools(self) -> list[BaseTool]:
        """The tools of every level: the model's own and those of every sub-agent below."""
        below = (t for loaded in self.loaded_folders() for c in loaded.children for t in c.langchain)
        return [*self.tools, *below]

    def loaded_folders(self) -> Iterator[LoadedTool]:
        """Every loaded tool folder, at every level of the tree."""
        pending = list(self.sub_agents)
        while pending:
            loaded = pending.pop()
            pending.extend(loaded.children)
            yield loaded

    def session(self, *, user_id: str, session_id: str | None = None) -> Session:
        """Open (or continue, with a known `session_id`) a conversation."""
        return Session(
            graph=self.graph,
            settings=self.settings,
            user_id=user_id,
            session_id=session_id,
            storage=self.storage,
            tasks=self.tasks,
        )


def _input_ended(*_: object) -> None:
    return None


def use_tool_threads(threads: int = TOOL_THREADS) -> None:
    """Give the running loop enough threads for a turn's sync tool calls to overlap."""
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tool")
    asyncio.get_running_loop().set_default_executor(executor)
