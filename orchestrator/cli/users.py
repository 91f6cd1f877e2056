"""`orchestrator users`: the people `orchestrator serve` answers, and their API keys.

The machine owner's commands: they run as the database's owner login. A key
is printed once, alone on stdout (`KEY=$(orchestrator users key alice)`); what
is kept is its hash, and `users list` shows ids and dates, never a secret.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from orchestrator.cli.common import JsonOption, err, out, with_database

if TYPE_CHECKING:
    from orchestrator.store.api_keys import UserSummary
    from orchestrator.store.engine import Database

users_app = typer.Typer(
    no_args_is_help=True, help="Users of `orchestrator serve` and their API keys: add, key, revoke, list."
)

NameArgument = Annotated[str, typer.Argument(help="The user's name: their user id everywhere.", show_default=False)]
ADDED = "added user {user}; `orchestrator users key {user}` issues them a key"
ISSUED = (
    "key {key_id} of {user}, shown this once: keep it secret "
    "(`orchestrator users revoke {user} --key {key_id}` ends it)"
)
REVOKED = "revoked {count} key(s) of {user}: {ids}"
NONE_LEFT = "{user} has no key that is not revoked already"
NO_USERS = "No users yet: `orchestrator users add NAME` makes one."


@users_app.command("add")
def add_user(name: NameArgument) -> None:
    """Make a user (no key yet)."""
    from orchestrator.store.api_keys import ApiKeys

    async def run(database: Database) -> None:
        await _upgraded(database)
        await ApiKeys(database).add_user(name)
        out.print(ADDED.format(user=name), markup=False, highlight=False)

    with_database(run)


@users_app.command("key")
def issue_key(name: NameArgument) -> None:
    """Issue a new key for the user: printed once, alone on stdout; its id on stderr."""
    from orchestrator.store.api_keys import ApiKeys

    async def run(database: Database) -> None:
        await _upgraded(database)
        issued = await ApiKeys(database).issue(name)
        print(issued.key, flush=True)  # plain print: no wrapping or markup in what a script reads
        err.print(ISSUED.format(key_id=issued.key_id, user=name), markup=False, highlight=False)

    with_database(run)


@users_app.command("revoke")
def revoke(
    name: NameArgument,
    key_id: Annotated[
        str | None, typer.Option("--key", help="Only this key (its id, from `users list`).", show_default=False)
    ] = None,
) -> None:
    """Revoke every key of the user's, or one with `--key`: the next request with it is refused."""
    from orchestrator.store.api_keys import ApiKeys

    async def run(database: Database) -> None:
        await _upgraded(database)
        revoked = await ApiKeys(database).revoke(name, key_id=key_id)
        line = REVOKED.format(count=len(revoked), user=name, ids=", ".join(revoked)) if revoked else None
        out.print(line or NONE_LEFT.format(user=name), markup=False, highlight=False)

    with_database(run)


@users_app.command("list")
def list_users(as_json: JsonOption = False) -> None:
    """Users and their keys: id, created, last used, revoked. Never a key itself."""
    from orchestrator.store.api_keys import ApiKeys

    async def run(database: Database) -> None:
        await _upgraded(database)
        users = await ApiKeys(database).users()
        if as_json:
            print(json.dumps({"users": [_user_json(user) for user in users]}, ensure_ascii=False))
        elif not users:
            out.print(NO_USERS, markup=False)
        else:
            out.print(_user_table(users), highlight=False)

    with_database(run)


async def _upgraded(database: Database) -> None:
    from orchestrator.store.migrations import upgrade

    await upgrade(database)


def _user_table(users: list[UserSummary]) -> Table:
    table = Table(box=None, pad_edge=False)
    for heading in ("user", "key", "created", "last used", "revoked"):
        table.add_column(heading, no_wrap=True)
    for user in users:
        if not user.keys:
            table.add_row(Text(user.user_id), "-", _when(user.created_at), "-", "-")
        for key in user.keys:
            table.add_row(
                Text(user.user_id), key.key_id, _when(key.created_at), _when(key.last_used_at), _when(key.revoked_at)
            )
    return table


def _user_json(user: UserSummary) -> dict[str, object]:
    keys = [
        {
            "key_id": key.key_id,
            "created_at": _iso(key.created_at),
            "last_used_at": _iso(key.last_used_at),
            "revoked_at": _iso(key.revoked_at),
        }
        for key in user.keys
    ]
    return {"user_id": user.user_id, "created_at": _iso(user.created_at), "keys": keys}


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M") if moment else "-"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None
