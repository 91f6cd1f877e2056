"""`orchestrator users add|key|revoke|list`, run in this process against the module's database."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from orchestrator.api.auth import ServerAuthenticator
from orchestrator.errors import AuthenticationError
from orchestrator.store.api_keys import ApiKeys
from orchestrator.store.engine import Database

Cli = Callable[..., CompletedProcess[str]]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ok(done: CompletedProcess[str]) -> CompletedProcess[str]:
    assert done.returncode == 0, done.stderr
    return done


def issued(cli: Cli, tmp_path: Path, user: str) -> tuple[str, str]:
    """A key issued by `users key`, as a script reads it from stdout, and its id from stderr."""
    done = ok(cli("users", "key", user, cwd=tmp_path))
    key = done.stdout.removesuffix("\n")
    assert done.stdout == f"{key}\n" and "\n" not in key  # alone on its line: KEY=$(...)
    match = re.search(r"key ([0-9a-f]{12}) of ", done.stderr)
    assert match is not None, done.stderr
    assert key not in done.stderr
    return key, match[1]


async def test_a_user_added_gets_a_key_that_authenticates_them(cli: Cli, tmp_path: Path, database: Database):
    user = unique("alice")
    added = ok(cli("users", "add", user, cwd=tmp_path))
    assert f"added user {user}" in added.stdout

    key, key_id = issued(cli, tmp_path, user)

    identity = await ServerAuthenticator(ApiKeys(database)).authenticate({"x-api-key": key})
    assert (identity.user_id, identity.key_id) == (user, key_id)


async def test_revoke_ends_one_key_or_all_and_the_next_request_is_refused(
    cli: Cli, tmp_path: Path, database: Database
):
    user = unique("bob")
    ok(cli("users", "add", user, cwd=tmp_path))
    (first, first_id), (second, second_id), (third, third_id) = (issued(cli, tmp_path, user) for _ in range(3))
    server = ServerAuthenticator(ApiKeys(database))
    await server.authenticate({"x-api-key": first})

    one = ok(cli("users", "revoke", user, "--key", first_id, cwd=tmp_path))
    assert one.stdout.strip() == f"revoked 1 key(s) of {user}: {first_id}"
    with pytest.raises(AuthenticationError):
        await server.authenticate({"x-api-key": first})
    await server.authenticate({"x-api-key": second})

    rest = ok(cli("users", "revoke", user, cwd=tmp_path))
    assert rest.stdout.strip() == f"revoked 2 key(s) of {user}: {', '.join(sorted([second_id, third_id]))}"
    for key in (second, third):
        with pytest.raises(AuthenticationError):
            await server.authenticate({"authorization": f"Bearer {key}"})
    again = ok(cli("users", "revoke", user, cwd=tmp_path))
    assert "no key that is not revoked already" in again.stdout


async def test_list_shows_users_and_key_ids_and_dates_never_a_key(cli: Cli, tmp_path: Path, database: Database):
    user, keyless = unique("carol"), unique("dave")
    for name in (user, keyless):
        ok(cli("users", "add", name, cwd=tmp_path))
    (used, used_id), (revoked, revoked_id) = issued(cli, tmp_path, user), issued(cli, tmp_path, user)
    await ServerAuthenticator(ApiKeys(database)).authenticate({"x-api-key": used})
    ok(cli("users", "revoke", user, "--key", revoked_id, cwd=tmp_path))

    table = ok(cli("users", "list", cwd=tmp_path)).stdout
    listed = json.loads(ok(cli("users", "list", "--json", cwd=tmp_path)).stdout)

    assert used not in table and revoked not in table and used not in json.dumps(listed)
    rows = {line.split()[1]: line for line in table.splitlines() if line.startswith(user)}
    assert set(rows) == {used_id, revoked_id}
    assert any(line.startswith(keyless) and " - " in line for line in table.splitlines())
    by_user = {entry["user_id"]: entry for entry in listed["users"]}
    keys = {key["key_id"]: key for key in by_user[user]["keys"]}
    assert keys[used_id]["last_used_at"] is not None and keys[used_id]["revoked_at"] is None
    assert keys[revoked_id]["last_used_at"] is None and keys[revoked_id]["revoked_at"] is not None
    assert by_user[keyless]["keys"] == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("users", "key", "nobody-at-all"), "error: no user 'nobody-at-all': `orchestrator users add nobody-at-all` makes one"),
        (("users", "revoke", "nobody-at-all"), "error: no user 'nobody-at-all'"),
        (("users", "add", "tab\there"), "error: a user name is 1 to 200 printable characters, not only spaces"),
        (("users", "add", "   "), "error: a user name is 1 to 200 printable characters"),
    ],
    ids=["key-unknown", "revoke-unknown", "bad-name", "blank-name"],
)
def test_what_users_cannot_act_on_is_one_line(cli: Cli, tmp_path: Path, args: tuple[str, ...], said: str):
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""


def test_a_user_added_twice_or_an_unknown_key_is_one_line(cli: Cli, tmp_path: Path):
    user = unique("erin")
    ok(cli("users", "add", user, cwd=tmp_path))
    twice = cli("users", "add", user, cwd=tmp_path)
    unknown = cli("users", "revoke", user, "--key", "0123456789ab", cwd=tmp_path)
    assert (twice.returncode, twice.stderr) == (1, f"error: user '{user}' exists already\n")
    assert unknown.returncode == 1
    assert unknown.stderr == f"error: user '{user}' has no key '0123456789ab' (`orchestrator users list` shows their keys)\n"
