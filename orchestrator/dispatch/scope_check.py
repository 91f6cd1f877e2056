"""AI scope: the model sets only the parameters its schema shows; the configuration, the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.errors import InvalidToolArgumentsError
from orchestrator.tools.results import ToolResult

if TYPE_CHECKING:  # only a type here: the scopes are resolved when folders load
    from orchestrator.folders.scope import ActionScope

HIDDEN_SENT = (
    "{name} does not take {parameters} from the model: {verb} fixed by the tool's configuration. "
    "Call it again without {pronoun}."
)


class ScopeMiddleware:
    """Refuses hidden parameters the model sent, and adds the fixed values to the arguments.

    A tool's scope (see `folders.scope`) is its `scope` attribute; a tool without
    one passes untouched. Runs before validation, which checks the merged
    arguments against the action's full parameter model.
    """

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        scope: ActionScope | None = getattr(request.tool, "scope", None)
        if scope is None:
            return await handler(request)
        sent = sorted(key for key in request.arguments if key in scope.hidden)
        if sent:
            return request.failed(InvalidToolArgumentsError(hidden_sent(request.name, sent)))
        return await handler(request.override(arguments={**request.arguments, **scope.fixed}))


def hidden_sent(name: str, parameters: list[str]) -> str:
    """The model's error for calling `name` with the hidden `parameters`."""
    quoted = ", ".join(repr(parameter) for parameter in parameters)
    one = len(parameters) == 1
    return HIDDEN_SENT.format(
        name=name,
        parameters=quoted,
        verb="it is" if one else "they are",
        pronoun="it" if one else "them",
    )
