"""The contract of a drop-in tool: a Pydantic class with actions and `async execute(request)`.

    class AddTask(BaseModel):
        title: str = Field(description="What to do.")

    class TaskAgent(Tool):
        @action
        async def add(self, params: AddTask, request: ToolRequest) -> ToolResult:
            "Add a task to the to-do list."
            ...

Each action's parameter model (the annotation of its `params`) gives the JSON
schema the model sees; the dispatch pipeline validates the arguments against it
once, before the action runs (`execute` validates a request that did not come
through the pipeline). An action
may also be a plain `def` for blocking work: it runs on a thread of its own,
so the event loop (other calls, timeouts, Ctrl-C) stays free meanwhile.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, ClassVar, TypeVar, Unpack, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PrivateAttr, ValidationError

from orchestrator.errors import (
    InvalidToolArgumentsError,
    OrchestratorError,
    ToolContractError,
    ToolError,
    validation_problems,
)
from orchestrator.tools.results import ResultFields, ToolResult
from orchestrator.tools.risk import RiskLevel, Urgency
from orchestrator.tools.threads import in_thread

if TYPE_CHECKING:
    from orchestrator.tools.context import FoundText, TextEmbedder, UserTransactions
    from orchestrator.tools.tool_settings import ToolSettings

SettingsT = TypeVar("SettingsT", bound="ToolSettings")

Params = TypeVar("Params", bound=BaseModel)
ToolT = TypeVar("ToolT", bound="Tool")
Handler = Callable[[ToolT, Params, "ToolRequest"], Awaitable[ToolResult] | ToolResult]

UNKNOWN_ACTION = "{tool} has no action {action!r}; its actions: {actions}."


class ToolRequest(BaseModel):
    """One call of a tool action, tied into the request tree by its ids."""

    request_id: str
    parent_request_id: str | None = None
    action: str
    parameters: dict[str, JsonValue] = Field(default_factory=dict)
    session_id: str | None = None
    user_id: str | None = None

    _parsed: BaseModel | None = PrivateAttr(default=None)

    def with_parsed(self, parsed: BaseModel) -> ToolRequest:
        """This request, carrying its parameters already validated (by the dispatch pipeline)."""
        self._parsed = parsed
        return self

    def parameters_as(self, model: type[Params]) -> Params:
        """The parameters as `model`: the validated ones when they are of it, else validated now."""
        if isinstance(self._parsed, model):
            return self._parsed
        return model.model_validate(self.parameters)

    def result(self, message: str = "", **fields: Unpack[ResultFields]) -> ToolResult:
        """A success result carrying this request's ids."""
        ids = {"request_id": self.request_id, "parent_request_id": self.parent_request_id}
        return ToolResult.model_validate({**ids, "message": message, **fields})


@dataclass(frozen=True)
class ActionSpec:
    """An action a tool offers: its name, what it does, and its typed parameters."""

    name: str
    description: str
    params: type[BaseModel]
    handler: Callable[..., Awaitable[ToolResult] | ToolResult]
    sensitive: bool = False  # its author's mark: every call needs the person's decision first
    risk_level: RiskLevel | None = None  # said at each question about a call of it (see `risk`)
    urgency: Urgency | None = None

    @property
    def blocking(self) -> bool:
        """A plain `def`: it runs on a thread of its own."""
        return not inspect.iscoroutinefunction(self.handler)


@overload
def action(handler: Handler[ToolT, Params], /) -> Handler[ToolT, Params]: ...


@overload
def action(
    params: type[Params],
    /,
    *,
    sensitive: bool = False,
    risk_level: RiskLevel | None = None,
    urgency: Urgency | None = None,
) -> Callable[[Handler[ToolT, Params]], Handler[ToolT, Params]]: ...


@overload
def action(
    *, sensitive: bool = False, risk_level: RiskLevel | None = None, urgency: Urgency | None = None
) -> Callable[[Handler[ToolT, Params]], Handler[ToolT, Params]]: ...


def action(
    target: Handler[ToolT, Params] | type[Params] | None = None,
    /,
    *,
    sensitive: bool = False,
    risk_level: RiskLevel | None = None,
    urgency: Urgency | None = None,
) -> Handler[ToolT, Params] | Callable[[Handler[ToolT, Params]], Handler[ToolT, Params]]:
    """Declare a method `(self, params, request) -> ToolResult` as an action.

    Bare, `@action` takes the parameter model from the annotation of `params`
    (the argument after `self`); `@action(Model)` names it instead. The
    method's name is the action's name and its docstring the description the
    model reads. `@action(sensitive=True)` (or `@action(Model, sensitive=True)`)
    marks an action whose every call needs the person's decision before it
    runs; `risk_level` (low, medium, high, critical) and `urgency` (low, normal,
    high) are said at each question about a call of it, unless its folder's
    `action_risk` says otherwise (see `risk`). An `async def` runs on the event
    loop and must not block it; a plain `def` (blocking I/O, CPU work) runs on
    a thread of its own. Misuse is
    a `ToolContractError` (a `TypeError`) when the class is defined.
    """
    if target is not None and not isinstance(target, type):
        return _mark(
            target, params=None, sensitive=sensitive, risk_level=risk_level, urgency=urgency
        )
    params = target
    if params is not None and BaseModel not in params.__mro__:
        raise ToolContractError(f"@action({params.__name__}): not a pydantic BaseModel")

    def mark(handler: Handler[ToolT, Params]) -> Handler[ToolT, Params]:
        return _mark(
            handler, params=params, sensitive=sensitive, risk_level=risk_level, urgency=urgency
        )

    return mark


@dataclass(frozen=True)
class _ActionMark:
    """What `@action` leaves on a method, for `Tool.__init_subclass__` to find."""

    params: type[BaseModel]
    sensitive: bool
    risk_level: RiskLevel | None = None
    urgency: Urgency | None = None


# An attribute of the function (not a registry beside it), so that a decorator
# above `@action` that copies `__dict__` (`functools.wraps`) keeps the mark.
_MARK = "__action_mark__"


def _mark(
    handler: Handler[ToolT, Params],
    *,
    params: type[Params] | None,
    sensitive: bool = False,
    risk_level: RiskLevel | None = None,
    urgency: Urgency | None = None,
) -> Handler[ToolT, Params]:
    if not inspect.isfunction(handler):
        raise ToolContractError(
            f"action {getattr(handler, '__name__', handler)!r} must be a method"
        )
    if not inspect.getdoc(handler):
        raise ToolContractError(
            f"action {handler.__qualname__} needs a docstring: the model reads it"
        )
    mark = _ActionMark(
        params=params or _annotated_params(handler),
        sensitive=sensitive,
        risk_level=risk_level,
        urgency=urgency,
    )
    setattr(handler, _MARK, mark)
    return handler


def _action_mark(member: object) -> _ActionMark | None:
    found = getattr(member, _MARK, None)
    return found if isinstance(found, _ActionMark) else None


def _annotated_params(handler: Callable[..., object]) -> type[BaseModel]:
    """The pydantic model annotating the argument after `self`, resolved in the method's module."""
    where = f"action {handler.__qualname__}"
    arguments = list(inspect.signature(handler).parameters.values())
    if len(arguments) < 3:
        raise ToolContractError(f"{where} must take (self, params, request)")
    argument = arguments[1]
    if argument.annotation is inspect.Parameter.empty:
        raise ToolContractError(
            f"{where}: annotate {argument.name!r} with its pydantic model, or write @action(Model)"
        )
    # Only this annotation is resolved: the others may name what the module
    # imports for type checkers only.
    holder = SimpleNamespace(__annotations__={argument.name: argument.annotation})
    try:
        model = get_type_hints(holder, globalns=handler.__globals__)[argument.name]
    except (NameError, AttributeError, SyntaxError, TypeError) as error:
        raise ToolContractError(
            f"{where}: cannot resolve the annotation of {argument.name!r} ({error}); "
            "define the model at module level, or write @action(Model)"
        ) from None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ToolContractError(
            f"{where}: {argument.name!r} is annotated {model!r}, not a pydantic BaseModel"
        )
    return model


@dataclass(frozen=True)
class ToolContext:
    """What the host gives a loaded tool: where it may keep files, the database, the embedder.

    `database.user_transaction(request.user_id)` sees only that user's rows.
    `folder` is the tool's folder (its own `.env` feeds its settings); `embedder`
    the orchestrator's embedding model, when one is configured.
    """

    data_dir: Path
    database: UserTransactions | None = None  # the store's Database; the store is above this layer
    folder: Path | None = None
    embedder: TextEmbedder | None = None

    def require_database(self, tool: str) -> UserTransactions:
        """The database, or a ToolError saying the tool needs one."""
        if self.database is None:
            raise ToolError(f"{tool} needs the database, and none is configured", recoverable=False)
        return self.database

    async def search_messages(self, query: str, k: int = 5) -> list[FoundText]:
        """The calling user's `k` earlier messages (any session) best matching `query`.

        Each found message has `session_id`, `role`, `content`, `created_at` and
        `score`. By meaning when an embedding model is configured, else by words;
        only the user of the call running now, under row-level security. ToolError
        outside a call, or in a run without the orchestrator's database.
        """
        from orchestrator.tools.context import NO_MESSAGES, current_context

        run = current_context()
        if run is None:
            raise ToolError(NO_MESSAGES, recoverable=False)
        return await run.search_messages(query, k)


def _no_capabilities() -> list[str]:
    return []


class Tool(BaseModel):
    """Base class of every drop-in tool.

    `name`, `description`, `version`, `config` and `capabilities` come from the
    folder's `tool_config.yaml` when the tool is loaded; class defaults serve
    when a tool is built directly (in its own tests, say).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    description: str
    version: str = "0.1.0"
    # Already checked as JSON in tool_config.yaml; a JsonValue field here would cost
    # every Tool subclass a recursive schema build (a millisecond each, at startup).
    config: dict[str, object] = Field(default_factory=dict)
    # A function of ours, not `list`: pydantic reads a factory's signature for every
    # subclass, and `inspect` copies the whole of `sys.modules` for a builtin's, so
    # startup grew with the square of the folders loaded.
    capabilities: list[str] = Field(default_factory=_no_capabilities)

    actions: ClassVar[dict[str, ActionSpec]] = {}
    # The settings its actions cannot run without (see `ToolSettings`), if any: read before a
    # call that needs the person's decision asks, so that an unconfigured tool says so first.
    settings_model: ClassVar[type[ToolSettings] | None] = None
    _context: ToolContext | None = PrivateAttr(default=None)

    def __init_subclass__(cls, **kwargs: Unpack[ConfigDict]) -> None:
        super().__init_subclass__(**kwargs)
        found = {
            name: ActionSpec(
                name=name,
                description=inspect.getdoc(member) or "",
                params=mark.params,
                handler=member,
                sensitive=mark.sensitive,
                risk_level=mark.risk_level,
                urgency=mark.urgency,
            )
            for name, member in inspect.getmembers(cls, inspect.isfunction)
            if (mark := _action_mark(member)) is not None
        }
        cls.actions = found

    @property
    def context(self) -> ToolContext:
        """The host's context; set when the tool is loaded."""
        if self._context is None:
            raise OrchestratorError(f"tool {self.name} was not loaded by a host (no context)")
        return self._context

    def settings(self, settings: type[SettingsT]) -> SettingsT:
        """`settings` read for this tool: the environment, its folder's `.env`, the
        orchestrator's `.env`, then its `config:` (a ToolError says what is missing)."""
        folder = self._context.folder if self._context is not None else None
        return settings.load(self.config, tool=self.name, folder=folder)

    def configuration_problem(self, *, action: str | None = None) -> ToolError | None:
        """Why the tool (or its `action`) cannot run as configured, or None.

        Read before a call that needs the person's decision asks: a call that could not run
        fails at once. Here: its `settings_model` unreadable; a tool may add its own reasons
        (an action its configuration turns off).
        """
        if self.settings_model is None:
            return None
        try:
            self.settings(self.settings_model)
        except ToolError as error:
            return error
        return None

    def bind_context(self, context: ToolContext) -> None:
        """Called by the loader before the tool is first used."""
        self._context = context

    async def execute(self, request: ToolRequest | Mapping[str, object]) -> ToolResult:
        """Validate the request's parameters against its action, then run the action.

        `request` may be the plain dict of the original design (`request_id`,
        `parent_request_id`, `action`, `parameters`); a missing `request_id` is made.
        """
        if not isinstance(request, ToolRequest):
            request = _request_of(request, tool=self.name)
        spec = self.actions.get(request.action)
        if spec is None:
            raise ToolError(
                UNKNOWN_ACTION.format(
                    tool=self.name, action=request.action, actions=", ".join(self.actions) or "none"
                ),
                code="unknown_action",
            )
        try:
            params = request.parameters_as(spec.params)
        except ValidationError as error:
            raise InvalidToolArgumentsError(
                f"Invalid arguments for {self.name}.{spec.name}: {validation_problems(error)}."
            ) from None
        if spec.blocking:
            returned = await in_thread(
                partial(spec.handler, self, params, request), name=f"{self.name}_{spec.name}"
            )
        else:
            returned = spec.handler(self, params, request)
        return await returned if inspect.isawaitable(returned) else returned


def _request_of(given: Mapping[str, object], *, tool: str) -> ToolRequest:
    """The `ToolRequest` a plain dict describes; an error naming what does not fit."""
    fields = {"request_id": uuid.uuid4().hex, **given}
    try:
        return ToolRequest.model_validate(fields)
    except ValidationError as error:
        raise InvalidToolArgumentsError(
            f"Invalid request for {tool}: {validation_problems(error)}."
        ) from None
