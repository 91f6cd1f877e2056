"""What every node of the agent graph uses: the run's context, and messages with ids."""

from __future__ import annotations

import uuid
from typing import TypeVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from orchestrator.tools.context import RunContext

Message = TypeVar("Message", bound=BaseMessage)

MODEL_NODE = "model"
TOOLS_NODE = "tools"


def run_context(runtime: Runtime[RunContext] | None, config: RunnableConfig) -> RunContext:
    """The run's context; a graph run without one (a bare `ainvoke`) gets one from its config."""
    # Typed a RunContext, it is None in a run given no context.
    context: RunContext | None = runtime.context if runtime is not None else None
    if context is not None:
        return context
    configurable = config.get("configurable", {})
    session = configurable.get("thread_id")
    return RunContext(
        user_id=str(configurable.get("user_id") or "anonymous"),
        session_id=None if session is None else str(session),
    )


def identified(message: Message) -> Message:
    """`message`, with an id if it had none: given as the node returns it, kept by its saved write.

    LangGraph's reducer would give it one each time the write is applied, and a
    resumed turn applies a saved write again: the archive would take it for a
    new message. (Streaming messages stamps them too; a run without it must.)
    """
    if message.id is None:
        message.id = str(uuid.uuid4())
    return message
