"""A login that lacks a privilege the migrations need: one line naming it and how to grant it.

PostgreSQL says "permission denied for schema public" (SQLSTATE 42501) and
SQLAlchemy wraps it with the statement; a person setting up a database needs
to read which login may not do what, where, and the statement a superuser
runs. PostgreSQL 15 took CREATE on schema `public` from PUBLIC, so a database
made by the superuser and not handed to the owner login meets this first.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from contextlib import contextmanager

from psycopg.errors import InsufficientPrivilege

from orchestrator.errors import DatabasePrivilegeError
from orchestrator.store.engine import Database

_SCHEMA = re.compile(r"permission denied for schema (\S+)")
_DATABASE = re.compile(r"permission denied for database (\S+)")
_EXTENSION = re.compile(r'permission denied to create extension "?([^"\s]+)"?')
_ROLE = re.compile(r"permission denied to create role")


@contextmanager
def migration_privileges(database: Database) -> Generator[None]:
    """Run migrations; a privilege the login lacks becomes a `DatabasePrivilegeError`."""
    try:
        yield
    except Exception as error:
        denied = _insufficient(error)
        if denied is None:
            raise
        raise DatabasePrivilegeError(missing_privilege(database, denied)) from None


def missing_privilege(database: Database, error: InsufficientPrivilege) -> str:
    """The one line for `error`: what the login may not do, and what grants it."""
    login, name = database.url.username or "?", database.url.database or "?"
    said = (error.diag.message_primary or str(error)).strip().splitlines()[0]
    owner = f"(or create the database with OWNER {login})"
    if match := _SCHEMA.search(said):
        schema = match[1].strip('"')
        return (
            f"the login `{login}` may not create in schema {schema} of database `{name}`: run as a "
            f"superuser: GRANT CREATE ON SCHEMA {schema} TO {login} {owner}"
        )
    if _DATABASE.search(said):
        return (
            f"the login `{login}` may not create schemas in database `{name}`: run as a superuser: "
            f"GRANT CREATE ON DATABASE {name} TO {login} {owner}"
        )
    if match := _EXTENSION.search(said):
        return (
            f"the login `{login}` may not create the extension {match[1]} in database `{name}`: "
            f"run as a superuser, in that database: CREATE EXTENSION {match[1]}"
        )
    if _ROLE.search(said):
        return (
            f"the login `{login}` may not create roles (the migrations create orchestrator_app): "
            f"run as a superuser: ALTER ROLE {login} CREATEROLE"
        )
    return (
        f"the login `{login}` lacks a privilege in database `{name}` ({said}): "
        "see docs/storage.md, An external PostgreSQL"
    )


def _insufficient(error: BaseException) -> InsufficientPrivilege | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, InsufficientPrivilege):
            return seen
        seen = seen.__cause__ or seen.__context__ or getattr(seen, "orig", None)  # SQLAlchemy's wrapper
    return None
