"""Token counts of model calls, read from LangChain's `usage_metadata`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import cast


@dataclass(frozen=True)
class TokenCount:
    """Tokens of one model call or of many.

    `input` counts every prompt token, `cached_input` and `cache_write` among
    them; `output` counts every generated token, `reasoning` among them (as
    OpenAI and LangChain count them).
    """

    input: int = 0
    output: int = 0
    cached_input: int = 0
    cache_write: int = 0
    reasoning: int = 0

    def __add__(self, other: TokenCount) -> TokenCount:
        return TokenCount(
            input=self.input + other.input,
            output=self.output + other.output,
            cached_input=self.cached_input + other.cached_input,
            cache_write=self.cache_write + other.cache_write,
            reasoning=self.reasoning + other.reasoning,
        )

    @property
    def total(self) -> int:
        """Input and output tokens together."""
        return self.input + self.output

    def to_json(self) -> dict[str, int]:
        """The counts by name, as `ask --json` and the request log show them."""
        return asdict(self)


def tokens_of(usage: Mapping[str, object] | None) -> TokenCount | None:
    """The counts of an `AIMessage.usage_metadata` (None when the model reported none)."""
    if not usage:
        return None
    details_in = _mapping(usage.get("input_token_details"))
    details_out = _mapping(usage.get("output_token_details"))
    return TokenCount(
        input=_count(usage.get("input_tokens")),
        output=_count(usage.get("output_tokens")),
        cached_input=_count(details_in.get("cache_read")),
        cache_write=_count(details_in.get("cache_creation")),
        reasoning=_count(details_out.get("reasoning")),
    )


def _mapping(value: object) -> Mapping[str, object]:
    # `isinstance` cannot say a Mapping's key type; this one is only read by `str` keys.
    return cast("Mapping[str, object]", value) if isinstance(value, Mapping) else {}


def _count(value: object) -> int:
    # A provider's odd value (None, a float, a negative number) must not break the count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(int(value), 0)
