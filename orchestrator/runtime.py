"""Wires the settings into a model, tools and a compiled graph, and opens sessions on it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Literal, TypedDict, Unpack

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.conversation.authorization_desk import SessionDesk
from orchestrator.conversation.job_board import JobBoard, LocalJobs
from orchestrator.conversation.session import Session
from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.errors import DeveloperError, UserError
from orchestrator.folders.approvals import Ask, Reviewed
from orchestrator.graph.builder import AgentGraph, build_agent_graph
from orchestrator.graph.model_pipeline.model_call import ModelMiddleware
from orchestrator.graph.prompts import orchestrator_prompt
from orchestrator.graph.spec import AgentSpec
from orchestrator.levels import Closure, LevelConfig, Limits, Planning
from orchestrator.llm.providers import build_chat_model, deferred_chat_model
from orchestrator.llm.reply import ReplyLimits
from orchestrator.redact import remember_settings
from orchestrator.settings import Settings, env_name
from orchestrator.sources.builtin import builtin_tools, human_tools
from orchestrator.sources.folder_tools import FolderSource
from orchestrator.sources.level_sources import AtLevel
from orchestrator.sources.loaded import LoadedTool
from orchestrator.sources.mcp.clients import AskServer, McpClients
from orchestrator.sources.operator_tools import operator_tools
from orchestrator.sources.search_messages import search_messages_tool
from orchestrator.sources.source import LoadsNow, ToolSource, unique_tools
from orchestrator.sources.static import StaticSource
from orchestrator.store.large_results import KeepLimits
from orchestrator.store.storage import Storage
from orchestrator.tools.agent import AgentTool
from orchestrator.tracing.provider import set_exit_timeout
from orchestrator.tracing.spans import record_content

logger = logging.getLogger(__name__)

# Sync LangChain tools run on the loop's default executor; the stock one has only
# cpu_count + 4 threads, which would serialise a turn's tool calls on a small machine.
TOOL_THREADS = 32
NO_SUCH_AGENT = "No approved top-level agent folder {name!r} to chat with (agents: {agents})"
BELOW_WITHOUT_FOLDERS = "sources for a level below the top (AtLevel) need the tool folders, not `tools=`"


class OrchestratorOptions(TypedDict, total=False):
    """What `Orchestrator.create` and `Orchestrator.start` take besides the settings (see `start`)."""

    ask: Ask | None
    reviewed: Reviewed | None
    ask_server: AskServer | None
    mcp_servers: McpClients | None
    storage: Storage | None
    model: BaseChatModel | None
    tools: list[BaseTool] | None
    checkpointer: BaseCheckpointSaver | None
    middleware: Sequence[ToolMiddleware] | None
    sources: Sequence[ToolSource | AtLevel] | None
    model_middleware: Sequence[ModelMiddleware] | None
    replace_defaults: bool


@dataclass(frozen=True)
class Orchestrator:
    """Everything a process needs to hold conversations."""

    settings: Settings
    model: BaseChatModel
    sources: list[ToolSource]
    tools: list[BaseTool]  # the orchestrator's own, from every source (one per name)
    graph: AgentGraph
    middleware: list[ToolMiddleware]
    storage: Storage | None = None
    jobs: JobBoard = field(default_factory=LocalJobs)  # who runs background calls
    spec: AgentSpec | None = None  # what its graph was built from (None: built by hand)

    @classmethod
    def create(cls, settings: Settings, **options: Unpack[OrchestratorOptions]) -> Orchestrator:
        """Build from settings, loading the tool sources on this thread (see `Orchestrator.start`).

        A source that cannot load synchronously (no `load`, see `LoadsNow`) is
        not opened: its tools are those it offers unopened.
        """
        plan = _Plan.of(settings, **options)
        for source in plan.sources:
            if isinstance(source, LoadsNow):
                source.load()
        return plan.runtime()

    @classmethod
    async def start(cls, settings: Settings, **options: Unpack[OrchestratorOptions]) -> Orchestrator:
        """Build from settings: the model, the tool sources (opened concurrently) and the graph.

        The sources are the built-in tools and the approved tool folders; a
        source that fails to open is logged and offers no tools. Options:
        `ask` is put every new or changed tool folder (without it, none is
        approved now), unless `reviewed` holds the answers already;
        `ask_server` every new or changed MCP server definition;
        `mcp_servers` are those servers, started already. With
        `storage`, sessions are durable and archived, and the model gets RAG
        context; without, they live in memory. `model`, `tools` and
        `checkpointer` replace the defaults; given `tools`, no folder is
        discovered. `sources` are opened beside the default ones and add
        their tools after theirs (a name already taken is not offered again);
        one wrapped in `AtLevel(path, source)` adds them to the agent folder at
        `path` instead (see `sources.level_sources`).
        `middleware` runs around every tool call at every level, outside the
        dispatch pipeline's defaults (see `dispatch.dispatcher.default_middleware`);
        `model_middleware` around every model call, outside the model chain's
        (see `graph.model_pipeline.defaults`). With `replace_defaults`, each of
        the two that is given is its chain whole, in place of the defaults:
        `middleware=[Mine(), *default_middleware(settings)]` puts yours first
        and keeps the settings' sensitive patterns.
        """
        plan = _Plan.of(settings, **options)
        opened = await asyncio.gather(*(s.open() for s in plan.sources), return_exceptions=True)
        for source, outcome in zip(list(plan.sources), opened, strict=True):
            if isinstance(outcome, Exception):
                logger.warning("tool source %s did not open: %s", source.name, outcome)
                plan.sources.remove(source)
            elif isinstance(outcome, BaseException):  # Ctrl-C, a cancellation: not the source's
                raise outcome
        return plan.runtime()

    @property
    def sub_agents(self) -> list[LoadedTool]:
        """The loaded tool folders of the top level (each with the levels below it)."""
        folders = (source for source in self.sources if isinstance(source, FolderSource))
        return [loaded for source in folders for loaded in source.loaded]

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

    def for_agent(self, name: str) -> Orchestrator:
        """This runtime with the approved top-level agent folder `name` alone at its top.

        Its graph is the agent's as the orchestrator would call it (its tools, its
        model and limits, its instructions), on the same checkpointer, storage and
        jobs; the orchestrator's own tools and prompt are not in it. UserError when
        no approved top-level folder of that name is an agent.
        """
        agents = {
            loaded.folder.name: (loaded.tool, loaded.level)
            for loaded in self.sub_agents
            if isinstance(loaded.tool, AgentTool) and loaded.level is not None
        }
        chosen = agents.get(name)
        if chosen is None or self.spec is None:
            names = ", ".join(sorted(agents)) or "none is approved"
            raise UserError(NO_SUCH_AGENT.format(name=name, agents=names))
        agent, level = chosen
        prompt = level.system_prompt or agent.system_prompt()
        spec = _agent_spec(self.spec, level, agent.tools, name=agent.name, system_prompt=prompt)
        saver = self.graph.checkpointer
        graph = build_agent_graph(
            spec, checkpointer=saver if isinstance(saver, BaseCheckpointSaver) else None
        )
        return replace(self, model=level.model, tools=list(spec.tools), graph=graph, spec=spec)

    def session(self, *, user_id: str, session_id: str | None = None) -> Session:
        """Open (or continue, with a known `session_id`) a conversation."""
        return Session(
            # Session types its graph as a bare CompiledStateGraph (no context type).
            graph=self.graph,  # pyright: ignore[reportArgumentType]
            settings=self.settings,
            user_id=user_id,
            session_id=session_id,
            storage=self.storage,
            jobs=self.jobs,
            authorizations=self._desk(),
        )

    def _desk(self) -> SessionDesk | None:
        """Where an operator level's tools find the user's pending authorization requests."""
        if self.storage is None:
            return None
        return SessionDesk(self.storage.database, self.graph, self._open_session)

    def _open_session(self, user_id: str, session_id: str) -> Session:
        return self.session(user_id=user_id, session_id=session_id)

    async def close(self) -> None:
        """Close every tool source (what a source fails to close is logged)."""
        for source in self.sources:
            try:
                await source.close()
            except Exception as error:
                logger.warning("closing tool source %s failed: %s", source.name, error)


@dataclass
class _Plan:
    """What a runtime is built from, before its sources are open and its graph compiled."""

    settings: Settings
    spec: AgentSpec  # the orchestrator's, its tools to come from the sources
    sources: list[ToolSource]
    storage: Storage | None
    checkpointer: BaseCheckpointSaver

    @classmethod
    def of(
        cls,
        settings: Settings,
        *,
        ask: Ask | None = None,
        reviewed: Reviewed | None = None,
        ask_server: AskServer | None = None,
        mcp_servers: McpClients | None = None,
        storage: Storage | None = None,
        model: BaseChatModel | None = None,
        tools: list[BaseTool] | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
        middleware: Sequence[ToolMiddleware] | None = None,
        sources: Sequence[ToolSource | AtLevel] | None = None,
        model_middleware: Sequence[ModelMiddleware] | None = None,
        replace_defaults: bool = False,
    ) -> _Plan:
        remember_settings(settings)  # errors shown to the model or the person hide its secrets
        record_content(settings.trace_content)
        set_exit_timeout(settings.trace_exit_timeout_seconds)
        model = model or build_chat_model(settings)
        prompt = orchestrator_prompt(settings)
        tool_result_model = _model_named(settings, "tool_result_model")
        level = LevelConfig(
            model=model,
            limits=Limits.from_settings(settings),
            database=storage.database if storage is not None else None,
            log_level=settings.log_level,
            system_prompt=prompt,
            context_tokens=settings.context_tokens,
            max_output_tokens=settings.max_output_tokens,
            planning=Planning.from_settings(settings),
            closure=Closure.from_settings(settings),
            tool_result_model=tool_result_model,
        )
        spec = AgentSpec(
            model=model,
            tools=(),
            limits=level.limits,
            system_prompt=prompt,
            middleware=middleware,
            model_middleware=model_middleware,
            replace_defaults=replace_defaults,
            sensitive_patterns=settings.sensitive_words,
            text_tool_calls=settings.text_tool_calls,
            reply_limits=ReplyLimits(
                max_output_tokens=settings.max_output_tokens,
                timeout_seconds=settings.model_timeout_seconds,
            ),
            context_tokens=settings.context_tokens,
            summary_model=_model_named(settings, "summary_model"),
            tool_result_model=tool_result_model,
            planning=level.planning,
            closure=level.closure,
            result_cache=settings.result_cache,
            result_keeping=KeepLimits.of(settings),
        )
        top = [source for source in sources or () if not isinstance(source, AtLevel)]
        below = [source for source in sources or () if isinstance(source, AtLevel)]
        if tools is not None:
            if below:
                raise DeveloperError(BELOW_WITHOUT_FOLDERS)
            given: list[ToolSource] = [StaticSource("given", tools)]
        else:
            folders = _FolderOptions(ask or _input_ended, reviewed, ask_server, mcp_servers, below)
            given = _default_sources(
                settings, level=level, spec=spec, storage=storage, folders=folders
            )
        if settings.operator:  # the orchestrator's own level answers the user's pending requests
            given.append(StaticSource("operator", operator_tools()))
        saver = checkpointer or (storage.checkpointer if storage is not None else InMemorySaver())
        return cls(settings, spec, [*given, *top], storage, saver)

    def runtime(self) -> Orchestrator:
        """The runtime, its graph compiled over the tools its sources offer now."""
        tools = unique_tools(tool for source in self.sources for tool in source.tools())
        retriever = self.storage.retriever if self.storage is not None else None
        spec = replace(self.spec, tools=tools, retriever=retriever)
        return Orchestrator(
            settings=self.settings,
            model=self.spec.model,
            sources=self.sources,
            tools=tools,
            graph=build_agent_graph(spec, checkpointer=self.checkpointer),
            middleware=self.spec.tool_middleware(),
            storage=self.storage,
            spec=spec,
        )


@dataclass(frozen=True)
class _FolderOptions:
    """Who decides about new or changed folders and MCP server definitions; servers started."""

    ask: Ask
    reviewed: Reviewed | None
    ask_server: AskServer | None
    servers: McpClients | None
    below: list[AtLevel]  # sources for the agents below the top


def _model_named(
    settings: Settings, field: Literal["summary_model", "tool_result_model"]
) -> BaseChatModel | None:
    """The model the setting `field` names (ORCHESTRATOR_SUMMARY_MODEL, ...), on the
    orchestrator's server; None when unset."""
    name = getattr(settings, field)
    if name is None:
        return None
    model_settings = settings.model_copy(update={"model": name})
    return deferred_chat_model(model_settings, setting=env_name(field))


def _default_sources(
    settings: Settings,
    *,
    level: LevelConfig,
    spec: AgentSpec,
    storage: Storage | None,
    folders: _FolderOptions,
) -> list[ToolSource]:
    """The built-in tools, then the approved tool folders."""
    builtins = [*builtin_tools(), *([search_messages_tool(storage.messages)] if storage else [])]

    def build_graph(
        level: LevelConfig, tools: Sequence[BaseTool], *, name: str, system_prompt: str
    ) -> AgentGraph:
        return build_agent_graph(
            _agent_spec(spec, level, tools, name=name, system_prompt=system_prompt)
        )

    source = FolderSource(
        settings,
        level=level,
        # `tools.agent.GraphFactory` returns a bare CompiledStateGraph (no context type).
        build_graph=build_graph,  # pyright: ignore[reportArgumentType]
        ask=folders.ask,
        reviewed=folders.reviewed,
        ask_server=folders.ask_server,
        servers=folders.servers,
        below=folders.below,
        embedder=storage.embedder if storage is not None else None,
    )
    return [StaticSource("builtin", builtins), source]


def _agent_spec(
    spec: AgentSpec, level: LevelConfig, tools: Sequence[BaseTool], *, name: str, system_prompt: str
) -> AgentSpec:
    """The orchestrator's `spec` made an agent's: its level's model, limits and window, its tools."""
    return replace(
        spec,
        model=level.model,
        # An agent at any level may ask the person; an operator's answers pending requests.
        tools=unique_tools([*tools, *human_tools(), *(operator_tools() if level.operator else [])]),
        limits=level.limits,
        system_prompt=system_prompt,
        name=name,
        context_tokens=level.context_tokens or spec.context_tokens,
        reply_limits=replace(spec.reply_limits, max_output_tokens=level.max_output_tokens),
        planning=level.planning,
        closure=level.closure,
        tool_result_model=level.tool_result_model,
    )


def _input_ended(*_: object) -> None:
    return None


def use_tool_threads(threads: int = TOOL_THREADS) -> None:
    """Give the running loop enough threads for a turn's sync tool calls to overlap."""
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tool")
    asyncio.get_running_loop().set_default_executor(executor)
