"""`as_node`: an approved folder's action as a node of your own LangGraph workflow.

    from orchestrator import as_node

    graph.add_node("stamp", as_node("stamp_agent", "stamp",
                                    inputs={"target": "document"}, output_key="stamp_result"))

The node reads the action's parameters from the state (`inputs`: parameter -> state
key, or a function of the state), runs the action through the orchestrator's dispatch
pipeline (request log, scope, approval, timeouts, usage) and writes its `Envelope`
(as a dict) under `output_key`. `inputs` may instead name the state key holding the
request in words (or be a function returning them): they are read as `orchestrator run`
reads them (`key: value`, or a sentence the level's model reads). It works in `invoke` and in `ainvoke`. A sensitive
action asks through LangGraph's `interrupt()`: with a checkpointer, the graph pauses
and `Command(resume={interrupt_id: {"type": "approve"}})` goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TypeAlias

from langchain_core.runnables import RunnableConfig, RunnableLambda

from orchestrator.actions.action_runner import RUN_PREFIX
from orchestrator.actions.address import Address, check_approved
from orchestrator.actions.free_text import parameters_from_text, reading_model
from orchestrator.actions.host import host_for
from orchestrator.errors import ToolError, UserError
from orchestrator.settings import Settings, load_settings
from orchestrator.tools.context import RunContext

State: TypeAlias = Mapping[str, object]
# Parameter -> state key; or the state key of the request in words; or a function of the
# state giving either the parameters or the words.
Inputs: TypeAlias = Mapping[str, str] | str | Callable[[State], Mapping[str, object] | str]
NodeUpdate: TypeAlias = dict[str, object]
MISSING_KEY = "{node}: the state has no {key!r} ({purpose})"
DEFAULT_USER = "local"


def as_node(
    folder: str,
    action: str,
    *,
    inputs: Inputs,
    output_key: str,
    user: str = DEFAULT_USER,
    settings: Settings | None = None,
) -> RunnableLambda[State, NodeUpdate]:
    """A node (sync and async) that runs `folder`'s approved `action` on the state.

    `folder` is the folder's path (`personal_assistant_agent/email_agent`).
    Raises UserError at once when the folder is not approved (approve it with
    `orchestrator tools approve` or in `orchestrator chat`); nothing of it is imported.
    `settings` default to the environment's, as the `orchestrator` command reads them.
    """
    host = host_for(settings or load_settings())
    check_approved(host.reviewed(), folder)
    name = f"{folder}.{action}"

    async def run(state: State, config: RunnableConfig) -> NodeUpdate:
        given = _arguments(state, inputs, node=name)
        address = await host.address(folder, action)
        runner = await host.runner(user)
        # One context: reading the words is part of the run's usage and cost, as in `run`.
        context = runner.context(_thread(config) or f"{RUN_PREFIX}{uuid.uuid4().hex}")
        arguments = given if not isinstance(given, str) else await _read(address, given, run=context)
        envelope = await runner.run(address, arguments, context=context, config=config)
        return {output_key: envelope.model_dump(mode="json")}

    def node(state: State, config: RunnableConfig) -> NodeUpdate:
        return host.portal.call(run(state, config))

    async def anode(state: State, config: RunnableConfig) -> NodeUpdate:
        return await host.portal.wait(run(state, config))

    return RunnableLambda(node, afunc=anode, name=name)


def _arguments(state: State, inputs: Inputs, *, node: str) -> dict[str, object] | str:
    """The parameters, or the request in words, that `inputs` takes from the state."""
    if callable(inputs):
        given = inputs(state)
        return given if isinstance(given, str) else dict(given)
    if isinstance(inputs, str):
        return str(_value(state, inputs, node=node, purpose="the request in words"))
    return {
        parameter: _value(state, key, node=node, purpose=f"for the parameter {parameter!r}")
        for parameter, key in inputs.items()
    }


async def _read(address: Address, text: str, *, run: RunContext) -> dict[str, object]:
    """The parameters the words give, as `orchestrator run` reads them; a UserError if they do not."""
    try:
        return await parameters_from_text(text, address.tool, model=reading_model(address.folder), run=run)
    except ToolError as error:
        raise UserError(str(error)) from None


def _value(state: State, key: str, *, node: str, purpose: str) -> object:
    try:
        return _field(state, key)
    except (KeyError, AttributeError):
        raise UserError(MISSING_KEY.format(node=node, key=key, purpose=purpose)) from None


def _field(state: State, key: str) -> object:
    # A TypedDict state is a dict; a Pydantic or dataclass state has attributes.
    return state[key] if isinstance(state, Mapping) else getattr(state, key)


def _thread(config: RunnableConfig) -> str | None:
    """The workflow's thread: the request log's session of the node's runs."""
    thread = (config.get("configurable") or {}).get("thread_id")
    return f"workflow-{thread}" if thread else None
