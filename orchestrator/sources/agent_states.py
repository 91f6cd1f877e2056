"""Each agent folder's `state:` (see `tools.agent_state`), resolved when its level is built.

`parent` sees at most `CALLER_SHARE` of the agent's window of its caller's
conversation; `standalone` keeps its conversations in its level's database,
or, without one (storage off), in this process's memory, which one warning
line says at load. On a folder that is no agent (no model of its own to see a
conversation) any `state:` but `local` is an error: the folder is skipped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError
from orchestrator.llm.tokens import context_window
from orchestrator.tools.agent_state import CALLER_SHARE, AgentState, MemoryConversations

if TYPE_CHECKING:
    from orchestrator.folders.tool_config import ToolConfig
    from orchestrator.levels import LevelConfig
    from orchestrator.settings import Settings

logger = logging.getLogger(__name__)

NOT_AN_AGENT = (
    "{name}: `state: {state}` is for agent folders (kind: agent, or an AgentTool class): "
    "a tool folder runs no model and has no conversation; remove `state:`"
)
IN_MEMORY = (
    "%s: `state: standalone` without a database (storage off): its conversations are kept "
    "in this process's memory and end with it"
)


def check_state(config: ToolConfig, *, agent: bool) -> None:
    """ConfigError when a folder that is no agent asks for a `state:` other than `local`."""
    if config.state != "local" and not agent:
        raise ConfigError(NOT_AN_AGENT.format(name=config.name, state=config.state))


def agent_state(config: ToolConfig, level: LevelConfig, settings: Settings) -> AgentState:
    """The `state:` of the agent folder `config`, at its `level`."""
    if config.state == "local":
        return AgentState()
    if config.state == "parent":
        configured = level.context_tokens or settings.context_tokens
        window, _ = context_window(level.model, configured=configured)
        return AgentState("parent", caller_tokens=int(CALLER_SHARE * window))
    if level.database is None:
        logger.warning(IN_MEMORY, config.name)
        return AgentState("standalone", store=MemoryConversations())
    from orchestrator.store.agent_conversations import AgentConversations

    return AgentState("standalone", store=AgentConversations(level.database))
