"""A chain of middleware around a handler: the one shape of the tool and the model side.

Modelled on LangChain v1's agent middleware: a middleware's wrap method gets the
request and the rest of the chain (`handler`), and may change the request,
answer in its place (not calling `handler`), call `handler` more than once, or
look at the response on its way out. Dispatch chains `awrap_tool_call`s around
the tool (`dispatch.middleware`), the model side `awrap_model_call`s around the
model (`graph.model_pipeline.model_call`); both are composed here, once, when
their pipeline is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

RequestT = TypeVar("RequestT")
ResponseT = TypeVar("ResponseT")
LayerT = TypeVar("LayerT")

# The rest of a chain, from one middleware's place in it: a request in, a response out.
Handler = Callable[[RequestT], Awaitable[ResponseT]]
# One middleware's wrap method (`awrap_tool_call`, `awrap_model_call`), bound to it.
Wrap = Callable[[RequestT, Handler[RequestT, ResponseT]], Awaitable[ResponseT]]


def compose(
    wraps: Iterable[Wrap[RequestT, ResponseT]], innermost: Handler[RequestT, ResponseT]
) -> Handler[RequestT, ResponseT]:
    """One handler: the first wrap outermost, `innermost` (the tool, the model) at the centre."""
    handler = innermost
    for wrap in reversed(list(wraps)):
        handler = _wrapped(wrap, handler)
    return handler


def _wrapped(
    wrap: Wrap[RequestT, ResponseT], handler: Handler[RequestT, ResponseT]
) -> Handler[RequestT, ResponseT]:
    # `run` hands on the wrap's awaitable rather than awaiting it, so that a layer
    # costs the chain no frame of its own.
    def run(request: RequestT) -> Awaitable[ResponseT]:
        return wrap(request, handler)

    return run


def with_defaults(
    given: Sequence[LayerT] | None,
    defaults: Callable[[], Sequence[LayerT]],
    *,
    replace_defaults: bool = False,
) -> list[LayerT]:
    """A chain's middleware, outermost first: `given` around the `defaults`.

    With `replace_defaults`, `given` is the whole chain in their place; a chain
    given nothing (None) keeps its defaults either way. One rule for both
    chains, so that `middleware=` and `model_middleware=` mean the same.
    """
    if given is None:
        return list(defaults())
    if replace_defaults:
        return list(given)
    return [*given, *defaults()]
