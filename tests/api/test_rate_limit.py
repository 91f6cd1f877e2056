"""The request-rate limit per key (ORCHESTRATOR_SERVER_REQUESTS_PER_MINUTE), on a clock the test moves."""

from __future__ import annotations

import uuid

import pytest

from orchestrator.api.auth import ServerAuthenticator
from orchestrator.api.rate_limit import RateLimit
from orchestrator.errors import RateLimitedError
from orchestrator.settings import load_settings
from orchestrator.store.api_keys import ApiKeys
from orchestrator.store.engine import Database


class Clock:
    """Seconds that pass only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def a_key(database: Database) -> str:
    keys, user = ApiKeys(database), f"user-{uuid.uuid4().hex[:8]}"
    await keys.add_user(user)
    return (await keys.issue(user)).key


async def test_a_key_past_its_rate_is_refused_with_the_seconds_to_wait(database: Database):
    clock = Clock()
    settings = load_settings(server_requests_per_minute=3)
    server = ServerAuthenticator.from_settings(settings, database, clock=clock)
    key, other = await a_key(database), await a_key(database)

    for _ in range(3):  # a minute's worth at once
        await server.authenticate({"x-api-key": key})
    with pytest.raises(RateLimitedError) as limited:
        await server.authenticate({"x-api-key": key})
    assert limited.value.retry_after == pytest.approx(20.0)  # one request each 60/3 seconds
    assert "at most 3 a minute; try again in 20 s" in str(limited.value) and key not in str(limited.value)

    await server.authenticate({"authorization": f"Bearer {other}"})  # another key: its own bucket
    clock.now += 19.0
    with pytest.raises(RateLimitedError) as still:
        await server.authenticate({"x-api-key": key})
    assert still.value.retry_after == pytest.approx(1.0)
    clock.now += 1.0
    await server.authenticate({"x-api-key": key})


async def test_zero_means_no_limit(database: Database):
    server = ServerAuthenticator.from_settings(load_settings(server_requests_per_minute=0), database, clock=Clock())
    key = await a_key(database)
    for _ in range(20):
        await server.authenticate({"x-api-key": key})
    assert server.rate_limit is None


def test_the_bucket_refills_to_a_minutes_worth_and_no_more():
    clock = Clock()
    limit = RateLimit(60, clock=clock)
    clock.now += 3600  # an hour idle: still only 60 at once
    for _ in range(60):
        limit.take("k")
    with pytest.raises(RateLimitedError) as limited:
        limit.take("k")
    assert limited.value.retry_after == pytest.approx(1.0)


def test_idle_keys_are_forgotten():
    clock = Clock()
    limit = RateLimit(2, clock=clock)
    for n in range(100):
        limit.take(f"key-{n}")
    clock.now += 61
    limit.take("now")
    assert list(limit._buckets) == ["now"]  # pyright: ignore[reportPrivateUsage]  # what memory holds
