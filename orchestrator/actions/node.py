"""`as_node`: an approved folder's action as a node of your own LangGraph workflow.

    from orchestrator import as_node

    graph.add_node("stamp", as_node("stamp_agent", "stamp",
                                    inputs={"target": "document"}, output_key="stamp_result"))

The node reads the action's parameters from the state (`inputs`: parameter -> state
key, or a function of the state), runs the action through the orchestrator's dispatch
pipeline (request log, scope, approval, timeouts, usage) and writes its `Envelope`
(as a dict) under `output_key`. It works in `invoke` and in `ainvoke`. A sensitive
action asks through LangGraph's `interrupt()`: with a checkpointer, the graph pauses
and `Command(resume={interrupt_id: {"type": "approve"}})` goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

from langchain_core.runnables import RunnableConfig, RunnableLambda

from orchestrator.actions.address import check_approved
from orchestrator.actions.host import host_for
from orchestrator.errors import UserError
from orchestrator.settings import Settings, load_settings

State: TypeAlias = Mapping[str, object]
Inputs: TypeAlias = Mapping[str, str] | Callable[[State], Mapping[str, object]]
NodeUpdate: TypeAlias = dict[str, object]
MISSING_KEY = "{node}: the state has no {key!r} (for the parameter {parameter!r})"
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
        arguments = _arguments(state, inputs, node=name)
        address = await host.address(folder, action)
        runner = await host.runner(user)
        session = _thread(config)
        envelope = await runner.run(address, arguments, session_id=session, config=config)
        return {output_key: envelope.model_dump(mode="json")}

    def node(state: State, config: RunnableConfig) -> NodeUpdate:
        return host.portal.call(run(state, config))

    async def anode(state: State, config: RunnableConfig) -> NodeUpdate:
        return await host.portal.wait(run(state, config))

    return RunnableLambda(node, afunc=anode, name=name)


def _arguments(state: State, inputs: Inputs, *, node: str) -> dict[str, object]:
    if callable(inputs):
        return dict(inputs(state))
    arguments = {}
    for parameter, key in inputs.items():
        try:
            arguments[parameter] = _read(state, key)
        except (KeyError, AttributeError):
            raise UserError(MISSING_KEY.format(node=node, key=key, parameter=parameter)) from None
    return arguments


def _read(state: State, key: str) -> object:
    # A TypedDict state is a dict; a Pydantic or dataclass state has attributes.
    return state[key] if isinstance(state, Mapping) else getattr(state, key)


def _thread(config: RunnableConfig) -> str | None:
    """The workflow's thread: the request log's session of the node's runs."""
    thread = (config.get("configurable") or {}).get("thread_id")
    return f"workflow-{thread}" if thread else None
