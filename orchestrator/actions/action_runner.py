"""One action run outside a model's tool call, through the same dispatch pipeline, as an envelope."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig

from orchestrator.actions.address import Address
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.envelope import Envelope
from orchestrator.usage.meter import UsageMeter

RUN_PREFIX = "run-"  # the request log's session of a run outside any conversation


@dataclass(frozen=True)
class ActionRunner:
    """Runs approved actions for `user` through `runtime`'s pipeline (or `middleware`).

    Each run is a request in the log under `user`, with its usage and cost,
    and passes scope, validation, approval, timeouts and retries as a
    model's call does.
    """

    runtime: Orchestrator
    user: str
    middleware: Sequence[ToolMiddleware] | None = None

    async def run(
        self,
        address: Address,
        arguments: Mapping[str, object],
        *,
        context: RunContext | None = None,
        session_id: str | None = None,
        config: RunnableConfig | None = None,
    ) -> Envelope:
        """Run `address`'s action with `arguments`; its envelope, failures included.

        `context` is the run's (see `context`; default: a new one, in `session_id`).
        Inside a LangGraph task (`config`), the request id follows from the task,
        so a node resumed after a question is the same request, not a second one.
        """
        level = address.folder.level
        limits = level.limits if level is not None else Limits.from_settings(self.runtime.settings)
        middleware = self.middleware if self.middleware is not None else self.runtime.middleware
        dispatcher = Dispatcher([address.tool], limits=limits, middleware=middleware)
        context = context or self.context(session_id or f"{RUN_PREFIX}{uuid.uuid4().hex}")
        if level is not None:  # whose question it is, when the action asks
            context = replace(context, agent_path=level.path)
        call = ToolCall(
            name=address.tool.name, args=dict(arguments), id=f"{RUN_PREFIX}{uuid.uuid4().hex}"
        )
        started, clock = datetime.now(UTC), time.monotonic()
        result = await dispatcher.dispatch(dispatcher.request(call, context, config=config))
        return Envelope.of(
            result,
            tool=address.tool_name,
            action=address.action,
            started=started,
            duration_ms=1000 * (time.monotonic() - clock),
        )

    def context(self, session_id: str) -> RunContext:
        """A run's context for `user` in the request log's session `session_id`, with a meter of its own."""
        settings = self.runtime.settings
        storage = self.runtime.storage
        return RunContext(
            user_id=self.user,
            session_id=session_id,
            observer=storage.requests if storage is not None else None,
            database=UserDatabase(storage.database, self.user) if storage is not None else None,
            messages=storage.messages if storage is not None else None,
            usage=UsageMeter(prices=settings.price_table, budgets=settings.budgets),
        )
