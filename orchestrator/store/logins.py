"""Who may log in to the embedded server: three roles, each with a generated password.

- `postgres`, the superuser: only this module logs in as it, to set the server
  up (roles, pg_hba.conf, a new database). The application never does.
- `orchestrator_owner` owns the schema and runs migrations and maintenance
  (embedding every user's messages): no superuser, but BYPASSRLS.
- `orchestrator_app` runs every user transaction, under row-level security.

The passwords live in `pgdata/orchestrator-secrets/` (0700; one file per role,
0600), where only this OS user (and the server's) can read them; the server
stores only SCRAM verifiers, computed here so that no password ever reaches a
statement PostgreSQL might log. pg_hba.conf allows SCRAM logins over the socket
and nothing else. A cluster an earlier version made (`trust` for everyone) is
converted on its first start with this code, its data untouched.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import LiteralString, TypeVar

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL, make_url

from orchestrator.errors import ConfigError
from orchestrator.redact import remember

SUPERUSER = "postgres"
OWNER_ROLE = "orchestrator_owner"
APP_ROLE = "orchestrator_app"
SECRETS_DIR = "orchestrator-secrets"
ROLE_OPTIONS: dict[str, LiteralString] = {
    OWNER_ROLE: "LOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION",
    APP_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION",
}
HBA_MARKER = "# orchestrator: password (SCRAM) logins over the private socket, nothing else"
HBA = f"{HBA_MARKER}\nlocal all all scram-sha-256\n"
# Until the passwords are set, on a cluster just made by initdb: only this OS
# user, as the superuser (peer authentication through the ident map below).
BOOTSTRAP_HBA = "# orchestrator: setting up\nlocal all postgres peer map=orchestrator\n"
SOCKET_PERMISSIONS = "0700"
SCRAM_ITERATIONS = 4096
RELOAD_SECONDS = 10.0


@dataclass(frozen=True)
class Logins:
    """The URLs of one database of the embedded server: its owner's and the application's."""

    owner_url: str
    app_url: str


def passwords(pgdata: Path) -> dict[str, str]:
    """Each role's password, generated on first use and kept in a file only this user can read.

    Each is redacted from then on from what a tool's error or a log shows (see `redact`).
    """
    folder = pgdata / SECRETS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    found = {role: _password(folder / role) for role in (SUPERUSER, OWNER_ROLE, APP_ROLE)}
    remember(*found.values())
    return found


def _password(path: Path) -> str:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def login_url(server_url: str, *, role: str, password: str, database: str, peer: str) -> str:
    """`server_url` (the package's, no password) as `role` on `database`.

    `requirepeer` makes libpq check that the socket belongs to the server's OS
    user, so a socket someone else put in its place is refused.
    """
    url: URL = make_url(server_url).set(username=role, password=password, database=database)
    url = url.update_query_dict({"requirepeer": peer})
    return url.render_as_string(hide_password=False)


def scram_verifier(password: str, *, salt: bytes | None = None) -> str:
    """What PostgreSQL stores for a SCRAM-SHA-256 password (RFC 5802 / 7677)."""
    salt = salt or secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, SCRAM_ITERATIONS)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${SCRAM_ITERATIONS}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def prepare_new_cluster(pgdata: Path) -> None:
    """On a cluster initdb just made (all `trust`): lock it down before its first start."""
    ident = pgdata / "pg_ident.conf"
    with ident.open("a") as file:
        file.write(f"\norchestrator {_os_user()} {SUPERUSER}\n")
    with (pgdata / "postgresql.conf").open("a") as file:
        file.write(f"\nunix_socket_permissions = {SOCKET_PERMISSIONS}\n")
    replace_file(pgdata / "pg_hba.conf", BOOTSTRAP_HBA)


def is_secured(pgdata: Path) -> bool:
    """Whether the server's logins are set up (pg_hba.conf is ours)."""
    hba = pgdata / "pg_hba.conf"
    return hba.exists() and hba.read_text().startswith(HBA_MARKER)


def secure_server(superuser_url: str, pgdata: Path) -> None:
    """Set every role's password, allow only SCRAM logins, and make the socket private.

    `superuser_url` holds the superuser's password: the server still lets it in
    without one (a cluster of an earlier version, or one bootstrapping), and
    once this is done only with it. The socket permission takes effect at the
    server's next start.
    """
    with psycopg.connect(superuser_url, autocommit=True) as connection:
        for role, password in passwords(pgdata).items():
            verifier = sql.Literal(scram_verifier(password))
            options = sql.SQL(ROLE_OPTIONS.get(role, ""))
            name = sql.Identifier(role)
            exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            verb = sql.SQL("ALTER" if exists else "CREATE")
            connection.execute(sql.SQL("{} ROLE {} {} PASSWORD {}").format(verb, name, options, verifier))
        # The owner switches to the application role (SET ROLE) and its migrations grant it.
        connection.execute(
            sql.SQL("GRANT {} TO {} WITH ADMIN OPTION").format(
                sql.Identifier(APP_ROLE), sql.Identifier(OWNER_ROLE)
            )
        )
        connection.execute(f"ALTER SYSTEM SET unix_socket_permissions = '{SOCKET_PERMISSIONS}'")
        hba_file = Path(_first(connection, "SHOW hba_file", str))
        loaded = _first(connection, "SELECT pg_conf_load_time()", datetime)
        replace_file(hba_file, HBA)
        connection.execute("SELECT pg_reload_conf()")
    _wait_for_reload(superuser_url, after=loaded)


_T = TypeVar("_T")


def _first(connection: psycopg.Connection, query: LiteralString, kind: type[_T]) -> _T:
    """The first column of the one row `query` returns, a `kind`."""
    row = connection.execute(query).fetchone()
    value: object = None if row is None else row[0]
    if not isinstance(value, kind):
        raise RuntimeError(f"{query!r} returned {value!r}, not a {kind.__name__}")
    return value


def _wait_for_reload(superuser_url: str, *, after: datetime) -> None:
    """Return once the server has read its configuration again (new connections see it).

    pg_reload_conf() only signals the server; a connection made before it has
    reread pg_hba.conf would still be let in the old way.
    """
    deadline = time.monotonic() + RELOAD_SECONDS
    while time.monotonic() < deadline:
        with psycopg.connect(superuser_url) as connection:
            if _first(connection, "SELECT pg_conf_load_time()", datetime) > after:
                return
        time.sleep(0.02)
    raise TimeoutError(f"the server did not reload its configuration within {RELOAD_SECONDS:.0f} s")


def prepare_database(superuser_url: str, database: str) -> None:
    """Create `database` for the owner role, or hand over one an earlier version made.

    Earlier versions ran everything as the superuser, which therefore owns the
    database's tables; the owner role takes them over (indexes, policies and
    identity sequences follow their table), so it can migrate them.
    """
    with psycopg.connect(superuser_url, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if not exists:
            connection.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(database), sql.Identifier(OWNER_ROLE)
                )
            )
    target = make_url(superuser_url).set(database=database).render_as_string(hide_password=False)
    with psycopg.connect(target, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS vector")  # only a superuser may
        connection.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(database), sql.Identifier(OWNER_ROLE)
            )
        )
        connection.execute(HAND_OVER_TABLES)


HAND_OVER_TABLES = f"""DO $$ DECLARE item record; BEGIN
    FOR item IN
        SELECT c.oid::regclass AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm')
          AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = '{SUPERUSER}')
    LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO {OWNER_ROLE}', item.name);
    END LOOP;
END $$"""

# Whether the owner can work on its own: the database is its, pgvector is there,
# and no table in it belongs to anyone else.
OWNER_READY = f"""SELECT d.datdba = r.oid
        AND EXISTS (SELECT FROM pg_extension WHERE extname = 'vector')
        AND NOT EXISTS (SELECT FROM pg_tables WHERE schemaname = 'public' AND tableowner <> r.rolname)
    FROM pg_database d, pg_roles r
    WHERE d.datname = current_database() AND r.rolname = '{OWNER_ROLE}'"""


def owner_ready(owner_url: str) -> bool:
    """Whether the owner role can use its database as it is (False if it cannot even log in)."""
    try:
        with psycopg.connect(owner_url, autocommit=True) as connection:
            row = connection.execute(OWNER_READY).fetchone()
    except psycopg.OperationalError:
        return False
    return bool(row and row[0])


def socket_parent() -> Path:
    """A directory of this user's for the socket (the package uses a shared one otherwise)."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    path = base / f"orchestrator-{os.geteuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise ConfigError(f"{path} is not a directory of this user's; remove it, or set TMPDIR")
    if os.geteuid() != 0:  # as root the server's own user must pass through it
        path.chmod(0o700)
    return path


def private_socket_dir(pgdata: Path, socket_dir: Path | None) -> None:
    """Leave the socket's directory to the server's user alone (the package makes it 0777 as root)."""
    if socket_dir is None or socket_dir == pgdata:
        return
    owner = pgdata.stat()
    if os.geteuid() == 0:
        os.chown(socket_dir, owner.st_uid, owner.st_gid)
    socket_dir.chmod(0o700)


def _os_user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, keeping its owner (the server's user) and mode.

    A process killed mid-write leaves the old file (and a stray `.tmp` beside it).
    """
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    if path.exists():
        info = path.stat()
        os.chmod(partial, info.st_mode & 0o777)
        if os.geteuid() == 0:
            os.chown(partial, info.st_uid, info.st_gid)
    os.replace(partial, path)
