"""One middleware vocabulary: one `compose` builds the tool pipeline and the model chain."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator import chain
from orchestrator.chain import Handler, compose, with_defaults
from orchestrator.dispatch import dispatcher
from orchestrator.graph.model_pipeline import defaults


def test_one_compose_serves_both_chains():
    assert dispatcher.compose is chain.compose, "the dispatch pipeline is composed by it"
    assert defaults.compose is chain.compose, "the model chain is composed by it"


@dataclass(frozen=True)
class Layer:
    """A middleware that writes its name on the request going in and on the answer going out."""

    name: str

    async def awrap(self, request: list[str], handler: Handler[list[str], str]) -> str:
        return f"{await handler([*request, self.name])}<{self.name}"


async def test_the_first_layer_is_outermost_and_the_innermost_handler_at_the_centre():
    async def centre(request: list[str]) -> str:
        return ">".join(request)

    handler = compose((layer.awrap for layer in (Layer("a"), Layer("b"))), centre)

    assert await handler(["in"]) == "in>a>b<b<a"
    assert await compose([], centre)(["alone"]) == "alone"


def test_given_middleware_goes_around_the_defaults_unless_it_replaces_them():
    def built() -> list[str]:
        return ["default"]

    assert with_defaults(None, built) == ["default"]
    assert with_defaults(["mine"], built) == ["mine", "default"]
    assert with_defaults(["mine"], built, replace_defaults=True) == ["mine"]
    assert with_defaults([], built, replace_defaults=True) == [], "an empty chain, explicitly"
    assert with_defaults(None, built, replace_defaults=True) == ["default"], "none given"
