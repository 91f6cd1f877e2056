"""Scratch databases on the embedded PostgreSQL for the database agent's tests."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy.engine import make_url


@contextmanager
def scratch_database(
    postgres_url: str,
    *,
    schema: str,
    tables: str,
    name: str,
    rights: str = "SELECT, INSERT, UPDATE, DELETE",
) -> Iterator[str]:
    """A database of its own holding `schema`, and the URL of a login that may read, change and
    delete the rows of `tables` (its only rights: the agent's guards are what stop it), or
    only what `rights` says (`SELECT`: a read-only role)."""
    database, role, password = (
        f"{name}_{uuid.uuid4().hex[:10]}",
        f"{name}_login_{uuid.uuid4().hex[:10]}",
        secrets.token_hex(12),
    )
    admin = make_url(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{database}"')
        connection.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'")
    owner = admin.set(database=database).render_as_string(hide_password=False)
    with psycopg.connect(owner, autocommit=True) as connection:
        connection.execute(schema)
        connection.execute(f'GRANT {rights} ON {tables} TO "{role}"')
    try:
        yield admin.set(database=database, username=role, password=password).render_as_string(
            hide_password=False
        )
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE "{database}" WITH (FORCE)')
            connection.execute(f'DROP ROLE "{role}"')
