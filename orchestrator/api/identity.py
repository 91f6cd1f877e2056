"""Who a request to `orchestrator serve` acts for, and what decides it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: the row-level-security user every statement of its request runs as.

    `key_id` names the credential (an API key's id, or `jwt:<issuer>:<subject>`), never its
    secret: the rate limit counts per `key_id` and the access log shows it.
    """

    user_id: str
    key_id: str
    via: Literal["api_key", "jwt"]


class Authenticator(Protocol):
    """Decides a request's identity from its headers (lower-case names), or raises
    `AuthenticationError` (401) or `RateLimitedError` (429). Touches nothing else."""

    async def authenticate(self, headers: Mapping[str, str]) -> Identity: ...
