"""API keys of `orchestrator serve`: issued, sent both ways, revoked, refused; kept only hashed."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError

from orchestrator.api.auth import ServerAuthenticator
from orchestrator.api.identity import Identity
from orchestrator.errors import AuthenticationError, ServerUserError
from orchestrator.store.api_keys import ApiKeys
from orchestrator.store.engine import Database


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def a_user_with_a_key(database: Database) -> tuple[str, str, str]:
    """A new user, a key of theirs and its id."""
    keys, user = ApiKeys(database), unique("user")
    await keys.add_user(user)
    issued = await keys.issue(user)
    return user, issued.key, issued.key_id


async def table_state(database: Database) -> list[tuple[str, str]]:
    """Every key's row version and row: what any write would change."""
    async with database.admin_transaction() as connection:
        rows = await connection.execute(text("SELECT xmin::text, k::text FROM api_keys k ORDER BY key_id"))
        return [(version, row) for version, row in rows]


async def refusal(authenticator: ServerAuthenticator, headers: dict[str, str]) -> str:
    with pytest.raises(AuthenticationError) as refused:
        await authenticator.authenticate(headers)
    return str(refused.value)


async def test_an_issued_key_is_the_users_identity_as_x_api_key_and_as_a_bearer_token(database: Database):
    user, key, key_id = await a_user_with_a_key(database)
    authenticator = ServerAuthenticator(ApiKeys(database))

    as_sdk = await authenticator.authenticate({"x-api-key": key})
    as_bearer = await authenticator.authenticate({"authorization": f"Bearer {key}"})
    lower_scheme = await authenticator.authenticate({"authorization": f"bearer  {key} "})

    assert as_sdk == as_bearer == lower_scheme == Identity(user_id=user, key_id=key_id, via="api_key")
    assert key.startswith(f"orch_{key_id}_")


async def test_x_api_key_wins_over_an_authorization_header_a_proxy_may_use(database: Database):
    user, key, _ = await a_user_with_a_key(database)
    identity = await ServerAuthenticator(ApiKeys(database)).authenticate(
        {"x-api-key": key, "authorization": "Basic cHJveHk6cGFzcw=="}
    )
    assert identity.user_id == user


async def test_a_revoked_key_is_refused_from_the_next_request(database: Database):
    user, key, key_id = await a_user_with_a_key(database)
    _, other_key, _ = await a_user_with_a_key(database)
    kept = await ApiKeys(database).issue(user)
    authenticator = ServerAuthenticator(ApiKeys(database))
    assert (await authenticator.authenticate({"x-api-key": key})).key_id == key_id

    # as `orchestrator users revoke` does, from another process: its own connections
    other_process = Database(database.libpq_url, app_url=database.app_libpq_url)
    try:
        assert await ApiKeys(other_process).revoke(user, key_id=key_id) == [key_id]
    finally:
        await other_process.close()

    before = await table_state(database)
    assert await refusal(authenticator, {"x-api-key": key}) == "unknown or revoked API key"
    assert await table_state(database) == before  # refused: nothing written, not even last used
    assert (await authenticator.authenticate({"x-api-key": kept.key})).key_id == kept.key_id
    assert (await authenticator.authenticate({"x-api-key": other_key})).user_id != user
    assert await ApiKeys(database).revoke(user) == [kept.key_id]  # all that were left
    assert await refusal(authenticator, {"authorization": f"Bearer {kept.key}"}) == "unknown or revoked API key"


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({}, "no credentials"),
        ({"x-api-key": "  "}, "no credentials"),
        ({"authorization": "Basic dXNlcjpwYXNz"}, "must be `Bearer"),
        ({"authorization": "Bearer"}, "must be `Bearer"),
        ({"x-api-key": "not-a-key"}, "malformed API key"),
        ({"x-api-key": "orch_0123456789ab_" + "A" * 42}, "malformed API key"),  # one short
        ({"authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"}, "malformed API key"),  # no OIDC
        ({"x-api-key": "orch_0123456789ab_" + "A" * 43}, "unknown or revoked API key"),
    ],
    ids=["none", "blank", "basic", "bearer-alone", "malformed", "short", "jwt-without-oidc", "unknown"],
)
async def test_a_missing_malformed_or_unknown_credential_is_refused_without_quoting_it(
    database: Database, headers: dict[str, str], said: str
):
    message = await refusal(ServerAuthenticator(ApiKeys(database)), headers)
    assert said in message
    for value in headers.values():
        secret = value.removeprefix("Bearer").strip()
        assert not secret or secret not in message


async def test_the_tables_hold_no_key_and_the_application_role_cannot_read_them(database: Database):
    user, key, key_id = await a_user_with_a_key(database)
    await ServerAuthenticator(ApiKeys(database)).authenticate({"x-api-key": key})
    secret = key.removeprefix(f"orch_{key_id}_")

    async with database.admin_transaction() as connection:
        rows = [
            *(await connection.scalars(text("SELECT k::text FROM api_keys k"))),
            *(await connection.scalars(text("SELECT u::text FROM api_users u"))),
            *(await connection.scalars(text("SELECT encode(key_hash, 'escape') FROM api_keys"))),
        ]
    assert any(key_id in row for row in rows) and any(user in row for row in rows)
    assert not [row for row in rows if secret in row or key in row]

    for table in ("api_keys", "api_users"):
        with pytest.raises(ProgrammingError, match="permission denied"):
            async with database.user_transaction(user) as connection:
                await connection.execute(text(f"SELECT * FROM {table}"))


async def test_last_used_is_written_once_a_minute_not_on_every_request(database: Database):
    _, key, key_id = await a_user_with_a_key(database)
    authenticator = ServerAuthenticator(ApiKeys(database))
    row = text("SELECT xmin::text, last_used_at FROM api_keys WHERE key_id = :k")

    async def state() -> tuple[str, datetime | None]:
        async with database.admin_transaction() as connection:
            version, used = (await connection.execute(row, {"k": key_id})).one()
        return version, used

    assert (await state())[1] is None
    await authenticator.authenticate({"x-api-key": key})
    first = await state()
    await authenticator.authenticate({"x-api-key": key})
    await authenticator.authenticate({"x-api-key": key})
    assert await state() == first  # the same row version: nothing written

    async with database.admin_transaction() as connection:
        ago = "UPDATE api_keys SET last_used_at = now() - interval '61 seconds' WHERE key_id = :k"
        await connection.execute(text(ago), {"k": key_id})
    moved = await state()
    await authenticator.authenticate({"x-api-key": key})
    later = await state()
    assert later[0] != moved[0] and later[1] is not None and moved[1] is not None and later[1] > moved[1]


async def test_users_and_keys_refuse_what_they_cannot_act_on(database: Database):
    keys, user = ApiKeys(database), unique("user")
    await keys.add_user(user)
    with pytest.raises(ServerUserError, match="exists already"):
        await keys.add_user(user)
    for bad in ("", "   ", "tab\there", "x" * 201):
        with pytest.raises(ServerUserError, match="1 to 200 printable characters"):
            await keys.add_user(bad)
    with pytest.raises(ServerUserError, match="no user"):
        await keys.issue(unique("nobody"))
    with pytest.raises(ServerUserError, match="no user"):
        await keys.revoke(unique("nobody"))
    with pytest.raises(ServerUserError, match="has no key 'ffffffffffff'"):
        await keys.revoke(user, key_id="ffffffffffff")
    _, _, someone_elses = await a_user_with_a_key(database)
    with pytest.raises(ServerUserError, match="has no key"):
        await keys.revoke(user, key_id=someone_elses)
    assert await keys.revoke(user) == []  # no key yet: nothing to revoke
